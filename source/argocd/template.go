package argocd

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	tparse "text/template/parse"
	"time"

	"github.com/Masterminds/sprig/v3"
	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	"keyhole.dev/keyhole/internal/apart"
	"keyhole.dev/keyhole/source"
)

// An ApplicationSet's template becomes an Application as the
// ApplicationSet controller makes it (applicationset/utils and
// applicationset/controllers/template in Argo CD): each string of the
// template, and each key, filled with a parameter set, as Go templates
// with goTemplate (Sprig's functions less env, expandenv and
// getHostByName, plus Argo CD's normalize, slugify, toYaml, fromYaml
// and fromYamlArray; the goTemplateOptions) or as fasttemplate
// placeholders without; then the templatePatch, filled as one string,
// merged in. A generator's selector keeps the parameter sets whose
// flattened parameters it matches.

// placeholder is a fasttemplate parameter, {{name}}, as ApplicationSets
// without goTemplate write them.
var placeholder = regexp.MustCompile(`\{\{\s*([A-Za-z0-9_.\[\]-]+)\s*\}\}`)

// appSetTmpl is how an ApplicationSet fills its templates.
type appSetTmpl struct {
	goTemplate bool
	// options are its goTemplateOptions, as written.
	options []string
}

// appSetTemplating is the templating of the ApplicationSet spec.
func appSetTemplating(spec *yaml.Node) appSetTmpl {
	return appSetTmpl{
		goTemplate: source.StringField(spec, "goTemplate") == "true" || source.BoolField(spec, "goTemplate"),
		options:    source.StringList(source.Lookup(spec, "goTemplateOptions")),
	}
}

// changingError is what a template function whose result changes from
// run to run returns: keyhole does not evaluate it.
type changingError struct{ name string }

func (e changingError) Error() string {
	return e.name + " gives a different value on every run, which keyhole does not evaluate"
}

// changingFuncs are the Sprig functions whose result is not the same for
// the same input (the clock, randomness, generated keys and salts).
var changingFuncs = []string{
	"now", "ago", "date", "date_in_zone", "date_modify", "dateInZone", "dateModify", "htmlDate", "htmlDateInZone",
	"randAlphaNum", "randAlpha", "randAscii", "randNumeric", "randBytes", "randInt", "uuidv4", "shuffle",
	"genPrivateKey", "genCA", "genCAWithKey", "genSelfSignedCert", "genSelfSignedCertWithKey", "genSignedCert",
	"genSignedCertWithKey", "encryptAES", "bcrypt", "htpasswd",
}

// appSetBase is a template holding the functions the ApplicationSet
// controller gives Go templates, cloned for each string it fills.
var appSetBase = sync.OnceValue(func() *template.Template {
	funcs := sprig.GenericFuncMap()
	// The controller removes these, so that a template learns nothing
	// of its environment: a template calling one does not parse.
	delete(funcs, "env")
	delete(funcs, "expandenv")
	delete(funcs, "getHostByName")
	for _, name := range changingFuncs {
		if _, ok := funcs[name]; ok {
			funcs[name] = func(...any) (string, error) { return "", changingError{name: name} }
		}
	}
	funcs["normalize"] = sanitizeName
	funcs["slugify"] = slugify
	funcs["toYaml"] = func(v any) (string, error) {
		data, err := sigsyaml.Marshal(v)
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(string(data), "\n"), nil
	}
	funcs["fromYaml"] = func(s string) (map[string]any, error) {
		m := map[string]any{}
		if err := sigsyaml.Unmarshal([]byte(s), &m); err != nil {
			return nil, err
		}
		return m, nil
	}
	funcs["fromYamlArray"] = func(s string) ([]any, error) {
		a := []any{}
		if err := sigsyaml.Unmarshal([]byte(s), &a); err != nil {
			return nil, err
		}
		return a, nil
	}
	return template.New("base").Funcs(funcs)
})

// templateOption matches the options text/template takes (Option
// panics on any other).
var templateOption = regexp.MustCompile(`^missingkey=(default|invalid|zero|error)$`)

// render is the string s filled with params, as the controller's Replace
// fills it.
func (t appSetTmpl) render(s string, params map[string]any) (string, error) {
	if !t.goTemplate {
		return placeholder.ReplaceAllStringFunc(s, func(m string) string {
			if v, ok := params[placeholder.FindStringSubmatch(m)[1]]; ok {
				return fmt.Sprint(v)
			}
			return m
		}), nil
	}
	tmpl, err := t.parse(s)
	if err != nil {
		return "", err
	}
	if !flatTemplate(tmpl) {
		return t.renderApart(s, params)
	}
	return execBounded(tmpl, params)
}

// A Go template of an ApplicationSet is the repository's, which may be a
// fork's pull request: it can ask for any amount of memory and time.
// `{{ range until 20000000 }}`, `{{ repeat 1000000000 "x" }}`, a string
// doubled by `{{ $s = cat $s $s }}` in a loop, or templates that each
// call the next twice (`{{ define }}`, `{{ template }}`): a bound on the
// output written catches none of the values a template builds without
// writing them, bounds on the arguments of Sprig's functions catch no
// loop that writes nothing, and Go can neither stop a template's
// goroutine nor survive a failed allocation. So a template that can
// loop, call another or hold a value in a variable is filled in a child
// process bounded in memory and time (internal/apart, as a Helm chart is
// rendered). One that cannot (flatTemplate) is filled here: each action
// runs once, no value is shared, and each function it may call gives
// at most what it was given and a constant more, so what it makes is
// bounded by the length of the template times the size of its
// parameters; its output is held to appSetOutputMax all the same.

// appSetRenderTimeout bounds the filling of one string in a child process.
var appSetRenderTimeout = 10 * time.Second

// appSetRenderMemory bounds the address space such a filling may add.
var appSetRenderMemory int64 = 512 << 20

// appSetOutputMax bounds what one string's filling may write.
const appSetOutputMax = 16 << 20

// flatFuncs are the functions a template filled in keyhole's own
// process may call: each gives a value no larger than its arguments
// and a constant (printf's widths are at most 10^6 by fmt's own rule),
// in time linear in them.
var flatFuncs = map[string]bool{
	"and": true, "or": true, "not": true, "eq": true, "ne": true, "lt": true, "le": true, "gt": true, "ge": true,
	"len": true, "index": true, "slice": true, "print": true, "printf": true, "println": true,
	"normalize": true, "slugify": true, "lower": true, "upper": true, "title": true, "untitle": true,
	"trim": true, "trimAll": true, "trimPrefix": true, "trimSuffix": true, "trunc": true, "substr": true,
	"default": true, "empty": true, "coalesce": true, "ternary": true, "contains": true, "hasPrefix": true,
	"hasSuffix": true, "base": true, "dir": true, "clean": true, "ext": true, "splitList": true, "toString": true,
	"squote": true, "cat": true, "get": true, "hasKey": true, "first": true, "last": true, "has": true,
	"int": true, "int64": true, "atoi": true, "add": true, "sub": true, "mul": true, "div": true, "mod": true,
	"add1": true, "max": true, "min": true, "sha1sum": true, "sha256sum": true, "regexMatch": true, "regexFind": true,
}

// flatTemplate reports whether tmpl, and every template it defines, is
// flat: no range, no call of another template, no variable declared or
// assigned, only flatFuncs called.
func flatTemplate(tmpl *template.Template) bool {
	for _, d := range tmpl.Templates() {
		if d.Name() != tmpl.Name() || d.Tree == nil {
			return false // a {{ define }}: only {{ template }} runs it
		}
		if !flatNode(d.Root) {
			return false
		}
	}
	return true
}

func flatNode(n tparse.Node) bool {
	switch n := n.(type) {
	case nil:
		return true
	case *tparse.ListNode:
		if n == nil {
			return true
		}
		for _, c := range n.Nodes {
			if !flatNode(c) {
				return false
			}
		}
		return true
	case *tparse.TextNode, *tparse.CommentNode, *tparse.DotNode, *tparse.FieldNode, *tparse.NilNode,
		*tparse.BoolNode, *tparse.NumberNode, *tparse.StringNode, *tparse.VariableNode:
		return true
	case *tparse.ActionNode:
		return flatNode(n.Pipe)
	case *tparse.IfNode:
		return flatNode(n.Pipe) && flatNode(n.List) && flatNode(n.ElseList)
	case *tparse.WithNode:
		return flatNode(n.Pipe) && flatNode(n.List) && flatNode(n.ElseList)
	case *tparse.PipeNode:
		if n == nil {
			return true
		}
		if len(n.Decl) > 0 || n.IsAssign {
			return false
		}
		for _, c := range n.Cmds {
			if !flatNode(c) {
				return false
			}
		}
		return true
	case *tparse.CommandNode:
		for _, a := range n.Args {
			if !flatNode(a) {
				return false
			}
		}
		return true
	case *tparse.IdentifierNode:
		return flatFuncs[n.Ident]
	case *tparse.ChainNode:
		return flatNode(n.Node)
	}
	return false // range, template, break, continue, and what is yet to come
}

// parse is s parsed as the controller parses it, with its options.
func (t appSetTmpl) parse(s string) (*template.Template, error) {
	tmpl, err := appSetBase().Clone()
	if err != nil {
		return nil, err
	}
	for _, o := range t.options {
		if !templateOption.MatchString(o) {
			return nil, fmt.Errorf("goTemplateOptions holds %q, which is not an option of Go templates (missingkey=default, invalid, zero or error)", o)
		}
		tmpl = tmpl.Option(o)
	}
	return tmpl.Parse(s)
}

// execBounded is tmpl executed with params, its output held to
// appSetOutputMax.
func execBounded(tmpl *template.Template, params map[string]any) (string, error) {
	w := &boundedWriter{max: appSetOutputMax}
	if err := tmpl.Execute(w, params); err != nil {
		if w.over {
			return "", fmt.Errorf("filling the template wrote more than %d MiB, the bound keyhole gives one string of an ApplicationSet's template", appSetOutputMax>>20)
		}
		return "", err
	}
	return w.String(), nil
}

// boundedWriter fails a write past max bytes, which ends the template's
// execution.
type boundedWriter struct {
	bytes.Buffer
	max  int
	over bool
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.Len()+len(p) > w.max {
		w.over = true
		return 0, errors.New("output over its bound")
	}
	return w.Buffer.Write(p)
}

// templateJob is the filling of one string of an ApplicationSet's
// template, done in a child process.
type templateJob struct {
	Text    string
	Options []string
	Params  apart.Value
}

// renderApart fills s with params in a child process.
func (t appSetTmpl) renderApart(s string, params map[string]any) (string, error) {
	p, err := apart.Carry(params)
	if err != nil {
		return "", err
	}
	ans, err := apart.Run(apart.KindTemplate, &templateJob{Text: s, Options: t.options, Params: p}, appSetRenderMemory,
		appSetRenderTimeout, "one string of an ApplicationSet's template")
	switch {
	case err != nil:
		return "", err
	case ans.Changing != "":
		return "", changingError{name: ans.Changing}
	case ans.Err != "":
		return "", errors.New(ans.Err)
	}
	return ans.Text, nil
}

// The child process is keyhole's own executable (or the test binary),
// which fills a string when apart.Env names a template: the init below
// takes over before main.
func init() {
	if os.Getenv(apart.Env) == apart.KindTemplate {
		os.Exit(apart.Serve(os.Stdin, os.Stdout, serveTemplateJob))
	}
}

// serveTemplateJob fills job's string, in the child process.
func serveTemplateJob(job *templateJob) apart.Answer {
	text, err := job.run()
	if err != nil {
		ans := apart.Answer{Err: err.Error()}
		if ce := (changingError{}); errors.As(err, &ce) {
			ans.Changing = ce.name
		}
		return ans
	}
	return apart.Answer{Text: text}
}

// run fills the job's string, in the child process.
func (j *templateJob) run() (string, error) {
	t := appSetTmpl{goTemplate: true, options: j.Options}
	tmpl, err := t.parse(j.Text)
	if err != nil {
		return "", err
	}
	params, _ := j.Params.Any().(map[string]any)
	return execBounded(tmpl, params)
}

// fill is a copy of the template n with each string scalar and each key
// filled with params, positions kept. Aliases stay as written.
func (t appSetTmpl) fill(n *yaml.Node, params map[string]any) (*yaml.Node, error) {
	if n == nil {
		return nil, nil
	}
	c := *n
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && strings.Contains(n.Value, "{{") {
		v, err := t.render(n.Value, params)
		if err != nil {
			return nil, err
		}
		c.Value, c.Tag = v, "!!str"
		if c.Style == 0 || c.Style == yaml.TaggedStyle {
			c.Style = yaml.DoubleQuotedStyle // "1.27" stays a string
		}
		return &c, nil
	}
	if n.Kind == yaml.AliasNode || n.Content == nil {
		return &c, nil
	}
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		f, err := t.fill(k, params)
		if err != nil {
			return nil, err
		}
		c.Content[i] = f
	}
	return &c, nil
}

// patch merges the ApplicationSet's templatePatch (tp, a string), filled
// with params, into the generated Application app, as the controller
// does: a strategic merge patch on Argo CD's Application type, which
// declares no merge keys, so mappings merge, lists and scalars are
// replaced and null removes a field; spec.project stays the template's.
// The patch's nodes take positions in the file from tp.
func (t appSetTmpl) patch(app, tp *yaml.Node, params map[string]any) (*yaml.Node, error) {
	if tp.Kind != yaml.ScalarNode {
		return nil, errors.New("its templatePatch is not a string")
	}
	s, err := t.render(tp.Value, params)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(s), &doc); err != nil {
		return nil, fmt.Errorf("its templatePatch, filled, is not YAML: %v", firstLine(err.Error()))
	}
	if len(doc.Content) == 0 {
		return app, nil
	}
	p := doc.Content[0]
	if p.Kind != yaml.MappingNode {
		return nil, errors.New("its templatePatch, filled, is not a mapping of an Application's fields")
	}
	block := tp.Style == yaml.LiteralStyle || tp.Style == yaml.FoldedStyle
	var place func(n *yaml.Node)
	place = func(n *yaml.Node) {
		if block {
			n.Line, n.Column = tp.Line+n.Line, tp.Column+n.Column+1
		} else {
			n.Line, n.Column = tp.Line, tp.Column
		}
		for _, c := range n.Content {
			place(c)
		}
	}
	place(p)
	project := source.Lookup(source.Lookup(app, "spec"), "project")
	out, err := mergePatch(app, p, "")
	if err != nil {
		return nil, err
	}
	if spec := source.Lookup(out, "spec"); spec != nil && spec.Kind == yaml.MappingNode {
		if project != nil {
			setField(spec, "project", project)
		} else {
			deleteField(spec, "project")
		}
	}
	return out, nil
}

// mergePatch is dst with the mapping patch merged in: mappings merge,
// anything else replaces, and null removes the field. Merging into a
// Helm source's valuesObject fails, as the controller's patch fails on
// it (it knows no fields of a RawExtension); key is dst's.
func mergePatch(dst, patch *yaml.Node, key string) (*yaml.Node, error) {
	if dst == nil || dst.Kind != yaml.MappingNode || patch.Kind != yaml.MappingNode {
		return patch, nil
	}
	if key == "valuesObject" && len(patch.Content) > 0 {
		return nil, fmt.Errorf("its templatePatch sets fields inside a valuesObject the template already has, which the controller cannot patch (unable to find api field in struct RawExtension for the json field %q)", patch.Content[0].Value)
	}
	out := *dst
	out.Content = slices.Clone(dst.Content)
	for i := 0; i+1 < len(patch.Content); i += 2 {
		k, v := patch.Content[i], patch.Content[i+1]
		if v.ShortTag() == "!!null" {
			deleteField(&out, k.Value)
			continue
		}
		m, err := mergePatch(source.Lookup(&out, k.Value), v, k.Value)
		if err != nil {
			return nil, err
		}
		setField(&out, k.Value, m)
	}
	return &out, nil
}

// deleteField removes key from mapping m.
func deleteField(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// selectParams keeps the parameter sets that the generator's selector
// sel (a label selector) matches, their parameters flattened into
// labels as the controller flattens them; values are not held to the
// rules of label values.
func selectParams(sel *yaml.Node, params []map[string]any) ([]map[string]any, error) {
	var out []map[string]any
	for _, p := range params {
		ok, err := selectorMatches(sel, flattenParams(p))
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// selectorMatches reports whether the label selector sel matches labels.
func selectorMatches(sel *yaml.Node, labels map[string]string) (bool, error) {
	if sel.Kind != yaml.MappingNode {
		return false, errors.New("its selector is not a label selector")
	}
	if ml := source.Lookup(sel, "matchLabels"); ml != nil {
		if ml.Kind != yaml.MappingNode {
			return false, errors.New("its selector's matchLabels is not a mapping")
		}
		for i := 0; i+1 < len(ml.Content); i += 2 {
			if v, ok := labels[ml.Content[i].Value]; !ok || v != ml.Content[i+1].Value {
				return false, nil
			}
		}
	}
	if me := source.Lookup(sel, "matchExpressions"); me != nil {
		if me.Kind != yaml.SequenceNode {
			return false, errors.New("its selector's matchExpressions is not a list")
		}
		for _, e := range me.Content {
			key, op, values := source.StringField(e, "key"), source.StringField(e, "operator"), source.StringList(source.Lookup(e, "values"))
			v, has := labels[key]
			switch op {
			case "In", "NotIn":
				if len(values) == 0 {
					return false, fmt.Errorf("its selector's %s %s has no values", key, op)
				}
				if in := has && slices.Contains(values, v); in != (op == "In") {
					return false, nil
				}
			case "Exists", "DoesNotExist":
				if len(values) > 0 {
					return false, fmt.Errorf("its selector's %s %s has values", key, op)
				}
				if has != (op == "Exists") {
					return false, nil
				}
			default:
				return false, fmt.Errorf("its selector's operator %q is not In, NotIn, Exists or DoesNotExist", op)
			}
		}
	}
	return true, nil
}

// flattenParams is a parameter set as labels: nested keys joined with
// ".", list items by index, values as Go prints them.
func flattenParams(p map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		join := func(k string) string {
			if prefix == "" {
				return k
			}
			return prefix + "." + k
		}
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(join(k), v[k])
			}
		case map[string]string:
			for k, x := range v {
				out[join(k)] = x
			}
		case []any:
			for i, x := range v {
				walk(join(strconv.Itoa(i)), x)
			}
		case []string:
			for i, x := range v {
				out[join(strconv.Itoa(i))] = x
			}
		default:
			out[prefix] = fmt.Sprintf("%v", v)
		}
	}
	for k, v := range p {
		walk(k, v)
	}
	return out
}

var notDNS = regexp.MustCompile(`[^-a-z0-9.]`)

// sanitizeName is Argo CD's normalize (and basenameNormalized): lower
// case, characters a name may not hold turned into "-", at most 253
// characters, no "-" or "." at either end.
func sanitizeName(s string) string {
	s = notDNS.ReplaceAllString(strings.ToLower(s), "-")
	if len(s) > 253 {
		s = s[:253]
	}
	return strings.Trim(s, "-.")
}

var unslugged, manyDashes = regexp.MustCompile(`[^a-zA-Z0-9_-]`), regexp.MustCompile(`-+`)

// slugify is Argo CD's slugify: [maxSize [smartTruncate]] name, the name
// sanitized and then made a slug as github.com/gosimple/slug makes one
// of what sanitizing leaves (".", runs of "-" become one "-"), cut to
// maxSize (50), at a "-" when smartTruncate (true).
func slugify(args ...any) (string, error) {
	maxSize, smart, name := 50, true, ""
	for i, a := range args {
		var ok bool
		switch i {
		case len(args) - 1:
			name, ok = a.(string)
		case 0:
			maxSize, ok = a.(int)
		case 1:
			smart, ok = a.(bool)
		}
		if !ok || len(args) > 3 {
			return "", errors.New("slugify takes [maxSize int [smartTruncate bool]] name string")
		}
	}
	s := sanitizeName(name)
	if !smart && maxSize >= 0 && len(s) >= maxSize {
		s = s[:maxSize]
	}
	s = strings.Trim(manyDashes.ReplaceAllString(unslugged.ReplaceAllString(s, "-"), "-"), "-_")
	if smart && maxSize > 0 && len(s) > maxSize {
		cut := strings.LastIndexByte(s[:maxSize+1], '-')
		if cut < 0 {
			cut = maxSize
		}
		s = s[:cut]
	}
	return s, nil
}
