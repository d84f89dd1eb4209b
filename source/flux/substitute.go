package flux

import (
	"context"
	"errors"
	"regexp"

	fluxkustomize "github.com/fluxcd/pkg/kustomize"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/resmap"

	"keyhole.dev/keyhole/source"
)

// Substitute applies u's postBuild substitution to what kustomize built,
// as kustomize-controller does after the build; vars are read from the
// ConfigMaps and Secrets the repository holds in the clear that u's
// cluster reads (heldFor).
func (Engine) Substitute(h source.Host, u *source.Unit, m resmap.ResMap) error {
	return substitute(u, m, heldFor(h, u.Flux.SourceRoot, u))
}

// substitute is Substitute with held giving the objects its
// substituteFrom names.
func substitute(u *source.Unit, m resmap.ResMap, held heldObjects) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("the Flux substitution failed on this input")
		}
	}()
	obj := u.Flux.Object
	if _, ok, _ := unstructured.NestedMap(obj.Object, "spec", "postBuild"); !ok {
		return nil
	}
	_, from, _ := unstructured.NestedSlice(obj.Object, "spec", "postBuild", "substituteFrom")
	c := &repoClient{held: held, unknown: map[string]string{}}
	if from {
		// A variable that only an object the repository does not hold
		// (or holds encrypted) can give stays as written: keyhole does
		// not know its value, and an empty one would be a finding of
		// its own making.
		used := map[string]bool{}
		for _, r := range m.Resources() {
			if y, err := r.AsYAML(); err == nil {
				for _, v := range varRef.FindAllSubmatch(y, -1) {
					used[string(v[1])] = true
				}
			}
		}
		known := c.knownVars(obj)
		for v := range used {
			if !known[v] {
				c.unknown[v] = "${" + v + "}"
			}
		}
	}
	for _, r := range m.Resources() {
		if _, err := fluxkustomize.SubstituteVariables(context.Background(), c, obj, r, fluxkustomize.SubstituteWithDryRun(!from)); err != nil {
			return err
		}
	}
	return nil
}

// varRef is a variable reference Flux substitutes: ${NAME}, ${NAME:=x}.
var varRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)`)

// knownVars are the variables the substituteFrom objects of obj that the
// repository holds in the clear give.
func (c *repoClient) knownVars(obj unstructured.Unstructured) map[string]bool {
	known := map[string]bool{}
	refs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "postBuild", "substituteFrom")
	for _, r := range refs {
		m, _ := r.(map[string]any)
		kind, _ := m["kind"].(string)
		name, _ := m["name"].(string)
		if d := c.held(kind, obj.GetNamespace(), name); d != nil {
			for k := range source.StringMap(source.Lookup(d.Node, "data")) {
				known[k] = true
			}
			for k := range source.StringMap(source.Lookup(d.Node, "stringData")) {
				known[k] = true
			}
		}
	}
	return known
}

// repoClient answers Flux's library the one question substitution asks a
// cluster, a ConfigMap's or Secret's data, from the repository's files.
// Every other method is the nil client's: substitution calls none.
type repoClient struct {
	client.Client
	// held gives the objects the substituting unit's cluster reads.
	held heldObjects
	// unknown are the variables an object the repository does not hold
	// in the clear stands for, each as written.
	unknown map[string]string
}

// Get fills obj with the ConfigMap or Secret of key the repository
// declares, or says it is not found.
func (c *repoClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		o.Data = map[string]string{}
		d := c.held("ConfigMap", key.Namespace, key.Name)
		if d == nil {
			for k, v := range c.unknown {
				o.Data[k] = v
			}
			return nil
		}
		for k, v := range source.StringMap(source.Lookup(d.Node, "data")) {
			o.Data[k] = v
		}
	case *corev1.Secret:
		o.Data = map[string][]byte{}
		d := c.held("Secret", key.Namespace, key.Name)
		if d == nil {
			for k, v := range c.unknown {
				o.Data[k] = []byte(v)
			}
			return nil
		}
		// A Secret's values never enter what keyhole reads: each of its
		// variables stays as written, so no diagnostic, render or diff
		// can quote one.
		for _, field := range []string{"data", "stringData"} {
			for k := range source.StringMap(source.Lookup(d.Node, field)) {
				o.Data[k] = []byte("${" + k + "}")
			}
		}
	default:
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return nil
}
