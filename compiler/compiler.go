package compiler

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// IgnoreAnnotation lists, comma-separated, the codes not to report on the
// object that carries it.
const IgnoreAnnotation = "keyhole.dev/ignore"

// Options tune a compilation.
type Options struct {
	// AllowMissingSecrets reports a Connection whose Secret is not in the
	// input as a warning instead of an error, for repositories whose
	// Secrets live elsewhere.
	AllowMissingSecrets bool
	// OperatorVersion is the omnia operator release the cluster runs, as
	// --operator-version gives it; it wins over keyhole.yaml's
	// operator.version. Empty means keyhole.yaml's, else
	// schema.DefaultOperator.
	OperatorVersion string
}

// Result is what Compile returns: the plan, every diagnostic, and how many
// objects it checked.
type Result struct {
	Plan        Plan
	Diagnostics diag.List
	// Objects counts the documents of a known kind that were checked.
	Objects int
}

// Compile checks the loaded documents against their schemas and the check
// table and resolves them into a Plan. It never fails: every problem is a
// diagnostic, and the Plan holds what could be resolved. Callers must not
// render a Plan whose diagnostics hold errors.
func Compile(docs []source.Document, v *schema.Validator, opts Options) Result {
	p := &pass{
		opts:    opts,
		secrets: map[ref]*secret{},
		classes: map[ref]*sandboxClass{},
		conns:   map[ref]*connection{},
	}
	catalog, err := schema.Catalog()
	if err != nil {
		// The built-in catalog is compiled in; this is a bug in keyhole.
		p.diags = append(p.diags, diag.Diagnostic{Code: codeConfigInvalid, Severity: diag.Error, Message: err.Error()})
	}
	p.catalog = catalog
	p.setOperator()
	// The Config comes first wherever it stands: it extends the catalog
	// the agents are checked against.
	for i := range docs {
		if d := &docs[i]; d.Node != nil && isConfig(d.Object()) {
			p.addConfig(v, d, item{doc: d, obj: d.Object()})
		}
	}
	for i := range docs {
		p.add(v, &docs[i])
	}
	for _, c := range table() {
		if c.run != nil {
			c.run(p)
		}
	}
	p.resolve()
	p.applyConfigIgnores()
	p.diags.Sort()
	return Result{Plan: p.plan, Diagnostics: p.diags, Objects: p.objects}
}

// ref names a namespaced object.
type ref struct{ namespace, name string }

func (r ref) String() string {
	if r.namespace == "" {
		return r.name
	}
	return r.namespace + "/" + r.name
}

// item is one checked object: where it came from and what it is.
type item struct {
	doc    *source.Document
	obj    diag.Object
	ignore []string
}

func (it *item) ref() ref { return ref{it.obj.Namespace, it.obj.Name} }

type connection struct {
	item
	w connectionWire
	// tmpls holds each inject entry's parsed value template, nil where the
	// entry has no value or it does not parse.
	tmpls []*config.Template
}

type secret struct {
	item
	// values maps each key to its decoded value; known is false for a key
	// whose value is not in the input (e.g. undecodable base64).
	values map[string]secretValue
	// from names what declares the Secret when it is not a plain Secret
	// (a SealedSecret, an ExternalSecret, a SOPS-encrypted Secret), for
	// messages; see secrets_sources.go.
	from string
	// keysUnknown is true when the input cannot list every key the Secret
	// will hold (an ExternalSecret with dataFrom), so no key can be called
	// missing.
	keysUnknown bool
}

type secretValue struct {
	known bool
	// err is why the value cannot go into a header, from
	// config.HeaderValue; the value itself is never kept.
	err error
}

type sandboxClass struct {
	item
	w sandboxClassWire
}

type owner struct {
	item
	w bindingOwnerWire
}

// pass is the state of one compilation.
type pass struct {
	opts    Options
	diags   diag.List
	objects int

	conns   map[ref]*connection
	secrets map[ref]*secret
	classes map[ref]*sandboxClass
	owners  []*owner
	// connList keeps Connections in input order for deterministic checks.
	connList []*connection
	agents   []*agent
	catalog  map[string]schema.Connector
	config   repoConfig

	plan Plan
}

// add validates one document and indexes it by kind.
func (p *pass) add(v *schema.Validator, doc *source.Document) {
	if doc.Node == nil {
		return
	}
	it := item{doc: doc, obj: doc.Object()}
	if ann := annotations(doc.Node); ann != "" {
		for _, c := range strings.Split(ann, ",") {
			if c = strings.TrimSpace(c); c != "" {
				it.ignore = append(it.ignore, c)
			}
		}
	}
	if isConfig(it.obj) {
		p.objects++
		return // read first, by addConfig
	}
	if p.addSecretSource(v, &it) {
		return
	}
	kind, ok := schema.Lookup(it.obj.APIVersion, it.obj.Kind)
	if !ok {
		if !doc.IsAgent() && it.obj.Kind != "" {
			p.report(codeKindUnknown, &it, path{"kind"}, false, "%s %s is not a kind keyhole checks; skipped", it.obj.APIVersion, it.obj.Kind)
		}
		return
	}
	p.objects++
	if vs := v.Validate(kind, doc.Node); len(vs) > 0 {
		for _, vi := range vs {
			pos, note := doc.At(vi.Line, vi.Column, vi.Path)
			p.diags = append(p.diags, p.diagnostic(codeSchemaInvalid, &it, pos, vi.Path, vi.Message+note))
		}
		return
	}
	switch kind {
	case "Connection":
		c := &connection{item: it}
		if p.decode(doc, &it, &c.w) {
			p.keep(&it)
			c.tmpls = make([]*config.Template, len(c.w.Spec.Placement.Inject))
			for i, in := range c.w.Spec.Placement.Inject {
				if in.Value != nil {
					c.tmpls[i], _ = config.ParseTemplate(*in.Value)
				}
			}
			p.conns[c.ref()] = c
			p.connList = append(p.connList, c)
		}
	case "Secret":
		var w secretWire
		if p.decode(doc, &it, &w) {
			p.checkSecretKeyNames(&it, w)
			p.secrets[it.ref()] = newSecret(it, w)
		}
	case "SandboxClass":
		c := &sandboxClass{item: it}
		if p.decode(doc, &it, &c.w) {
			p.keep(&it)
			p.classes[c.ref()] = c
		}
	case schema.KindAgent:
		a := &agent{item: it}
		if p.decode(doc, &it, &a.w) {
			p.agents = append(p.agents, a)
		}
	case "AgentRuntime", "ToolRegistry":
		p.checkOperatorObject(v, doc, &it, kind)
		o := &owner{item: it}
		if p.decode(doc, &it, &o.w) {
			p.keep(&it)
			p.owners = append(p.owners, o)
		}
	}
}

// keep lists an omnia object that passed its schema in the Plan, for
// targets that re-emit the inputs.
func (p *pass) keep(it *item) {
	p.plan.Objects = append(p.plan.Objects, Object{Source: it.obj, Pos: it.doc.Pos, Node: it.doc.Node})
}

// decode fills a wire type from a document that passed its schema. A
// failure here means the schema let through a shape the wire type cannot
// hold; it is reported rather than ignored.
func (p *pass) decode(doc *source.Document, it *item, out any) bool {
	if err := doc.Node.Decode(out); err != nil {
		p.report(codeSchemaInvalid, it, nil, false, "cannot read %s: %s", it.obj.Kind, strings.TrimPrefix(err.Error(), "yaml: "))
		return false
	}
	return true
}

// checkSecretKeyNames reports keys the API server would refuse, by the
// rule the proxy and render use (config.CheckSecretKey). The generated
// JSON Schema cannot say this (a pattern on map keys does not survive
// generation), so the compiler does; the key is named, its value never.
func (p *pass) checkSecretKeyNames(it *item, w secretWire) {
	for _, field := range []struct {
		name string
		m    map[string]string
	}{{"data", w.Data}, {"stringData", w.StringData}} {
		for _, k := range slices.Sorted(maps.Keys(field.m)) {
			if err := config.CheckSecretKey(k); err != nil {
				p.report(codeSchemaInvalid, it, path{field.name, k}, true, "%s", keyProblem(err))
			}
		}
	}
}

// keyProblem is CheckSecretKey's message without its sentinel's prefix.
func keyProblem(err error) string {
	return strings.TrimPrefix(err.Error(), config.ErrName.Error()+": ")
}

func newSecret(it item, w secretWire) *secret {
	s := &secret{item: it, values: map[string]secretValue{}}
	for k, v := range w.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			s.values[k] = secretValue{}
			continue
		}
		_, herr := config.HeaderValue(b)
		s.values[k] = secretValue{known: true, err: herr}
	}
	// stringData wins over data for the same key, as the API server merges it.
	for k, v := range w.StringData {
		_, herr := config.HeaderValue([]byte(v))
		s.values[k] = secretValue{known: true, err: herr}
	}
	return s
}

func (s *secret) keys() []string {
	ks := make([]string, 0, len(s.values))
	for k := range s.values {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// secretOf returns the Secret a Connection reads, and its reference.
func (p *pass) secretOf(c *connection) (*secret, ref) {
	r := ref{namespace: cmp.Or(c.w.Spec.Credential.SecretRef.Namespace, c.obj.Namespace), name: c.w.Spec.Credential.SecretRef.Name}
	return p.secrets[r], r
}

func annotations(n *yaml.Node) string {
	v, _ := child(n, "metadata")
	v, _ = child(v, "annotations")
	v, _ = child(v, IgnoreAnnotation)
	if v == nil || v.Kind != yaml.ScalarNode {
		return ""
	}
	return v.Value
}

// report records a diagnostic about it at path p (its key node when key
// is true), with the table's severity for code.
func (p *pass) report(code string, it *item, at path, key bool, format string, args ...any) {
	n := at.find(it.doc.Node, key)
	pos, note := it.doc.Where(n)
	p.diags = append(p.diags, p.diagnostic(code, it, pos, at.String(), fmt.Sprintf(format, args...)+note))
}

// reportUse reports on a key use, pointing at the reference itself inside
// a template value where the column can be known exactly.
func (p *pass) reportUse(code string, it *item, u keyUse, format string, args ...any) {
	n := u.at.find(it.doc.Node, false)
	pos, note := it.doc.Where(n)
	if note == "" {
		pos.Column = refColumn(n, u.offset)
	}
	p.diags = append(p.diags, p.diagnostic(code, it, pos, u.at.String(), fmt.Sprintf(format, args...)+note))
}

// refColumn returns the column of the byte at offset in scalar n's value,
// or n's own column where escapes, quotes or line breaks make the source
// column unknowable from the value.
func refColumn(n *yaml.Node, offset int) int {
	v := n.Value
	if offset < 0 || offset > len(v) || strings.ContainsAny(v, "\n\r\t") {
		return n.Column
	}
	col := n.Column + utf8.RuneCountInString(v[:offset])
	switch n.Style {
	case 0:
		return col
	case yaml.SingleQuotedStyle:
		if !strings.Contains(v, "'") {
			return col + 1
		}
	case yaml.DoubleQuotedStyle:
		if !strings.ContainsAny(v, `"\`) {
			return col + 1
		}
	}
	return n.Column
}

func (p *pass) diagnostic(code string, it *item, pos diag.Pos, fieldPath, msg string) diag.Diagnostic {
	d := diag.Diagnostic{Code: code, Severity: severity(code), Pos: pos, Object: it.obj, Path: fieldPath, Message: msg}
	if code == codeSecretMissing && p.opts.AllowMissingSecrets {
		d.Severity = diag.Warning
	}
	if slices.Contains(it.ignore, code) {
		d.Suppressed = "annotation"
	}
	return d
}
