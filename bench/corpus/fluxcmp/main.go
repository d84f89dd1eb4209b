// Command fluxcmp compares keyhole's reading of the Flux Kustomizations of
// repositories with kustomize-controller's, as Flux's own library
// (github.com/fluxcd/pkg/kustomize) does it: for each Flux unit keyhole
// finds, the kustomization Flux's Generator writes into a copy of the
// repository, SecureBuild of the unit's path, and postBuild substitution,
// against the objects keyhole builds for that unit (source.Load with
// every unit built). It prints one Markdown table row per repository:
// the units compared, those that agree, and those that differ, with the
// first difference of each on stderr.
//
//	go run ./bench/corpus/fluxcmp DIR...
//
// Each DIR is a checked-out repository (bench/corpus.sh -flux-compare
// runs it on the corpus's Flux repositories). Substitution's variables
// come from the ConfigMaps the repository holds in the clear, one of each
// namespace and name; where it holds several (one per cluster), or none,
// the variables they give are left to keyhole and the objects using them
// are counted apart (values not settled by the repository), not as a
// difference: keyhole keeps such a variable as written. A Secret's values are
// never read: both sides see "${KEY}".
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fluxcmp DIR...")
		os.Exit(2)
	}
	fmt.Println("| repository | Flux units | compared | same objects and values | objects differ | values differ | values not settled by the repository | Flux fails | keyhole did not build |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, dir := range os.Args[1:] {
		r, err := compareRepo(dir)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", dir, err)
			continue
		}
		fmt.Printf("| %s | %d | %d | %d | %d | %d | %d | %d | %d |\n", filepath.Base(dir), r.units, r.compared, r.same, r.objects, r.values, r.varies, r.fluxFails, r.unbuilt)
	}
}

type result struct {
	units, compared, same, objects, values, varies, fluxFails, unbuilt int
}

// object is one built object: its identity and its content, with a
// Secret's data masked.
type object struct {
	id   string // kind namespace/name
	body string // JSON
}

func compareRepo(dir string) (result, error) {
	var r result
	abs, err := filepath.Abs(dir)
	if err != nil {
		return r, err
	}
	docs, ds, err := source.Load([]string{"."}, source.Options{Engines: engines.All(), Dir: abs, AllUnits: true})
	if err != nil {
		return r, err
	}
	units := map[string]*source.Unit{}
	keyhole := map[string][]object{}
	for _, d := range docs {
		u := d.Unit()
		if u == nil || u.Flux == nil {
			continue
		}
		units[u.Name] = u
		var m map[string]any
		if d.Node == nil || d.Node.Decode(&m) != nil {
			continue
		}
		keyhole[u.Name] = append(keyhole[u.Name], toObject(m))
	}
	// A unit keyhole could not build says so in a diagnostic naming it.
	unbuilt := map[string]bool{}
	for _, d := range ds {
		for _, n := range d.Units {
			if strings.HasPrefix(n, "flux:") && units[n] == nil && !unbuilt[n] {
				unbuilt[n] = true
				fmt.Fprintf(os.Stderr, "%s %s: keyhole did not build it: %s %s\n", filepath.Base(dir), n, d.Code, firstLine(d.Message))
			}
		}
	}
	r.unbuilt = len(unbuilt)
	r.units = len(unbuilt)
	// Flux's generator writes into the tree it builds: a copy.
	tmp, err := os.MkdirTemp("", "fluxcmp-")
	if err != nil {
		return r, err
	}
	defer os.RemoveAll(tmp)
	if err := copyRepo(abs, tmp); err != nil {
		return r, err
	}
	held := heldObjects(tmp)
	for _, name := range sortedKeys(units) {
		u := units[name]
		r.units++
		kobjs := keyhole[name]
		fobjs, vary, err := fluxBuild(abs, tmp, u, held)
		if err != nil {
			r.fluxFails++
			fmt.Fprintf(os.Stderr, "%s %s: Flux fails: %v\n", filepath.Base(dir), name, firstLine(err.Error()))
			continue
		}
		r.compared++
		switch diff, kind := compareObjects(kobjs, fobjs, vary); kind {
		case "":
			r.same++
		case "objects":
			r.objects++
			fmt.Fprintf(os.Stderr, "%s %s: objects differ: %s\n", filepath.Base(dir), name, diff)
		case "varies":
			r.varies++
		default:
			r.values++
			fmt.Fprintf(os.Stderr, "%s %s: values differ: %s\n", filepath.Base(dir), name, diff)
		}
	}
	return r, nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

func toObject(m map[string]any) object {
	kind, _ := m["kind"].(string)
	md, _ := m["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if kind == "Secret" {
		for _, f := range []string{"data", "stringData"} {
			if d, ok := m[f].(map[string]any); ok {
				for k := range d {
					d[k] = "(masked)"
				}
			}
		}
	}
	if md != nil {
		// Build bookkeeping, not content.
		if a, ok := md["annotations"].(map[string]any); ok {
			for k := range a {
				if strings.HasPrefix(k, "config.kubernetes.io/") || strings.HasPrefix(k, "internal.config.kubernetes.io/") || strings.HasPrefix(k, "kustomize.config.k8s.io/") {
					delete(a, k)
				}
			}
			if len(a) == 0 {
				delete(md, "annotations")
			}
		}
	}
	b, _ := json.Marshal(m)
	return object{id: kind + " " + ns + "/" + name, body: string(b)}
}

// compareObjects says how keyhole's objects differ from Flux's: "" when
// they agree, "objects" when one side has an object the other has not,
// "varies" when only objects using a variable of vary differ, "values"
// otherwise; diff names the first difference.
func compareObjects(k, f []object, vary map[string]bool) (diff, kind string) {
	km, fm := map[string]string{}, map[string]string{}
	for _, o := range k {
		km[o.id] = o.body
	}
	for _, o := range f {
		fm[o.id] = o.body
	}
	for _, id := range sortedKeys(fm) {
		if _, ok := km[id]; !ok {
			return "only Flux builds " + id, "objects"
		}
	}
	for _, id := range sortedKeys(km) {
		if _, ok := fm[id]; !ok {
			return "only keyhole builds " + id, "objects"
		}
	}
	kind = ""
	for _, id := range sortedKeys(km) {
		if km[id] == fm[id] {
			continue
		}
		varies := vary[absent] && strings.Contains(km[id], "${")
		for _, v := range varRef.FindAllStringSubmatch(km[id]+fm[id], -1) {
			if vary[v[1]] {
				varies = true
			}
		}
		if varies {
			kind = cmp.Or(kind, "varies")
			continue
		}
		return id + ": " + firstDiff(km[id], fm[id]), "values"
	}
	return "", kind
}

// firstDiff names the first field where the JSON objects a (keyhole's)
// and b (Flux's) differ, and both values.
func firstDiff(a, b string) string {
	var x, y any
	_ = json.Unmarshal([]byte(a), &x)
	_ = json.Unmarshal([]byte(b), &y)
	var walk func(x, y any, at string) string
	walk = func(x, y any, at string) string {
		xm, xok := x.(map[string]any)
		ym, yok := y.(map[string]any)
		if xok && yok {
			keys := map[string]bool{}
			for k := range xm {
				keys[k] = true
			}
			for k := range ym {
				keys[k] = true
			}
			for _, k := range sortedKeys(keys) {
				if d := walk(xm[k], ym[k], at+"/"+k); d != "" {
					return d
				}
			}
			return ""
		}
		xl, xok := x.([]any)
		yl, yok := y.([]any)
		if xok && yok && len(xl) == len(yl) {
			for i := range xl {
				if d := walk(xl[i], yl[i], fmt.Sprintf("%s/%d", at, i)); d != "" {
					return d
				}
			}
			return ""
		}
		xb, _ := json.Marshal(x)
		yb, _ := json.Marshal(y)
		if bytes.Equal(xb, yb) {
			return ""
		}
		// Where two long values part, from a little before.
		i := 0
		for i < len(xb) && i < len(yb) && xb[i] == yb[i] {
			i++
		}
		from := max(0, i-80)
		return fmt.Sprintf("%s (from byte %d): keyhole %s, Flux %s", at, from, clip(string(xb[from:])), clip(string(yb[from:])))
	}
	return walk(x, y, "")
}

func clip(s string) string {
	if len(s) > 400 {
		return s[:400] + "..."
	}
	return s
}

// absent marks, among the variables that vary, that a substituteFrom
// object the repository does not hold was asked for.
const absent = "\x00absent"

var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// fluxBuild builds the unit u as kustomize-controller does, in the copy
// tmp of the repository at abs, and returns its objects and the
// variables whose values the repository does not settle.
func fluxBuild(abs, tmp string, u *source.Unit, held *heldSet) (objs []object, vary map[string]bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	rel := func(p string) (string, error) {
		r, err := filepath.Rel(abs, p)
		if err != nil || strings.HasPrefix(r, "..") {
			return "", fmt.Errorf("%s is outside the repository", p)
		}
		return filepath.Join(tmp, r), nil
	}
	root, err := rel(u.Flux.SourceRoot)
	if err != nil {
		return nil, nil, err
	}
	dir, err := rel(u.Root)
	if err != nil {
		return nil, nil, err
	}
	obj := u.Flux.Object
	action, err := fluxkustomize.NewGenerator(root, obj).WriteFile(dir, fluxkustomize.WithSaveOriginalKustomization())
	if err != nil {
		return nil, nil, err
	}
	defer fluxkustomize.CleanDirectory(dir, action)
	m, err := fluxkustomize.SecureBuild(root, dir, false)
	if err != nil {
		return nil, nil, err
	}
	c := &heldClient{held: held, vary: map[string]bool{}}
	_, postBuild := obj.Object["spec"].(map[string]any)["postBuild"]
	for _, res := range m.Resources() {
		if postBuild {
			if _, err := fluxkustomize.SubstituteVariables(context.Background(), c, obj, res); err != nil {
				return nil, nil, err
			}
		}
		var mm map[string]any
		b, err := res.AsYAML()
		if err != nil {
			return nil, nil, err
		}
		if err := yaml.Unmarshal(b, &mm); err != nil {
			return nil, nil, err
		}
		objs = append(objs, toObject(mm))
	}
	return objs, c.vary, nil
}

// heldSet holds the ConfigMaps and Secrets of a repository, in the
// clear, by kind, namespace and name.
type heldSet struct {
	byKey map[string][]map[string]string
}

func heldObjects(root string) *heldSet {
	h := &heldSet{byKey: map[string][]map[string]string{}}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("kind: ConfigMap")) && !bytes.Contains(b, []byte("kind: Secret")) {
			return nil
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o struct {
				APIVersion string `yaml:"apiVersion"`
				Kind       string
				Metadata   struct{ Name, Namespace string }
				Data       map[string]any
				StringData map[string]any `yaml:"stringData"`
				Sops       any
			}
			if err := dec.Decode(&o); err != nil {
				if err == io.EOF {
					break
				}
				break
			}
			if o.APIVersion != "v1" || (o.Kind != "ConfigMap" && o.Kind != "Secret") || o.Sops != nil {
				continue
			}
			data := map[string]string{}
			for k, v := range o.Data {
				data[k], _ = v.(string)
			}
			for k, v := range o.StringData {
				data[k], _ = v.(string)
			}
			if o.Kind == "Secret" {
				for k := range data {
					data[k] = "${" + k + "}"
				}
			}
			key := o.Kind + "/" + cmp.Or(o.Metadata.Namespace, "default") + "/" + o.Metadata.Name
			h.byKey[key] = append(h.byKey[key], data)
		}
		return nil
	})
	return h
}

// heldClient answers substitution's Get from a heldSet: the object where
// the repository holds one of that key; where it holds several or none,
// the variables stay as written (keyhole's reading), and are noted in
// vary.
type heldClient struct {
	client.Client
	held *heldSet
	vary map[string]bool
}

func (c *heldClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	kind := ""
	switch obj.(type) {
	case *corev1.ConfigMap:
		kind = "ConfigMap"
	case *corev1.Secret:
		kind = "Secret"
	default:
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	all := c.held.byKey[kind+"/"+key.Namespace+"/"+key.Name]
	data := map[string]string{}
	if len(all) == 0 {
		// Not held in the clear (SOPS, an ExternalSecret's): keyhole
		// keeps its variables as written, Flux would read the cluster.
		c.vary[absent] = true
	}
	if len(all) == 1 {
		data = all[0]
	} else {
		for _, d := range all {
			for k := range d {
				c.vary[k] = true
				data[k] = "${" + k + "}"
			}
		}
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		o.Data = data
	case *corev1.Secret:
		o.Data = map[string][]byte{}
		for k, v := range data {
			o.Data[k] = []byte(v)
		}
	}
	return nil
}

// copyRepo copies the files of the repository at src (not .git) to dst.
func copyRepo(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, _ := filepath.Rel(src, p)
		t := filepath.Join(dst, r)
		switch {
		case d.IsDir() && d.Name() == ".git":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(t, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return nil
			}
			return os.Symlink(l, t)
		case !d.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		return os.WriteFile(t, b, 0o644)
	})
}
