package compiler

import (
	"cmp"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/access"
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
	// DefaultNamespace is the namespace of an object that names none, as
	// render places it (render.Options.DefaultNamespace): references
	// resolve in it, so a namespace-less Secret is found by a Connection
	// in that namespace. "default" when empty.
	DefaultNamespace string
	// DefaultSandboxImage is the image render gives a sandbox whose
	// SandboxClass (or, for an agent, keyhole.yaml) names none
	// (render.Options.DefaultSandboxImage, --sandbox-image); without
	// one, such a sandbox is SandboxImageMissing.
	DefaultSandboxImage string
	// NoSandboxImages is set by callers whose output runs no sandbox
	// Deployment (render --target omnia): SandboxImageMissing is not
	// reported.
	NoSandboxImages bool
	// Parallelism is how many documents Compile digests at once (those
	// the loader's Digest did not); zero means runtime.GOMAXPROCS(0).
	// Whatever it is, Compile returns the same Result.
	Parallelism int
	// Loaded are the loader's diagnostics. They are returned with the
	// compiler's, merged across deploy units like them, and the Config's
	// ignores apply to them too.
	Loaded diag.List
	// OmitObjects leaves Plan.Objects empty, for callers whose output
	// does not re-emit the input objects (check, the kubernetes target):
	// at a hundred thousand objects the list is tens of megabytes.
	OmitObjects bool
	// OmitPlans has Compile run every check and build no plan: the
	// Result's plans hold only the operator, the diagnostics and counts
	// are the same. For callers that only report (keyhole check): the
	// plans of every sandbox are a quarter of the compiler's memory.
	OmitPlans bool
	// OmitSuppressedMessages keeps of a suppressed diagnostic all but
	// its message, for callers whose output only counts suppressed
	// findings (check's text format without -v, and github): a
	// repository that suppresses a finding on each of 100,000
	// Connections held 37 MB of their messages.
	OmitSuppressedMessages bool
	// keyHash is what DuplicateObject's index hashes an object's key
	// with; nil means a seeded maphash. Tests set one under which every
	// key collides.
	keyHash func(objectKey) uint64
}

// Result is what Compile returns: the plan of each deploy unit, every
// diagnostic, and how many objects it checked.
type Result struct {
	// Plan is the plan of the input's one deploy unit; when the input has
	// several, it is empty and Units holds each one's.
	Plan Plan
	// Units are the deploy units, sorted by name, each with its plan
	// (docs/inputs.md). The loose files' unit is named "".
	Units       []Unit
	Diagnostics diag.List
	// Objects counts the documents of a known kind that were checked,
	// once each however many units build them.
	Objects int
	// Gate is what decides what the check reads and reports besides the
	// objects: the Config's settings and the ignore annotations.
	Gate Gate
}

// Unit is one deploy unit's plan.
type Unit struct {
	// Unit is the deploy unit: its Name is how the user names it (a
	// kustomization root's directory as reported, a Flux Kustomization
	// as flux:NS/NAME, "" for the files read outside any kustomization),
	// its Dir where render -o writes it among several.
	source.Unit
	Plan Plan
}

// Compile checks the loaded documents against their schemas and the check
// table and resolves them into a Plan per deploy unit. It never fails:
// every problem is a diagnostic, and the Plans hold what could be
// resolved. Callers must not render a Plan whose diagnostics hold errors.
//
// Each deploy unit (docs/inputs.md) is compiled on its own, as the
// cluster applies it: duplicates are found, and references resolved,
// within it. The one exception is a Secret (or what declares it): a unit
// that does not hold the Secret a Connection reads finds it in another
// unit, since a cluster applies several. The Config applies to every
// unit. A diagnostic that several units share (a mistake in a base two
// overlays build) is reported once, naming them.
func Compile(docs []*source.Document, v *schema.Validator, opts Options) Result {
	opts.DefaultNamespace = cmp.Or(opts.DefaultNamespace, "default")
	catalog, catErr := schema.Catalog()
	var configs []*source.Document
	byUnit := map[*source.Unit][]*source.Document{}
	for _, d := range docs {
		if d.Node == nil && !d.Released() {
			continue
		}
		if isConfig(d.Object()) {
			configs = append(configs, d)
			continue
		}
		byUnit[d.Unit()] = append(byUnit[d.Unit()], d)
	}
	names := slices.SortedFunc(maps.Keys(byUnit), func(a, b *source.Unit) int { return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID)) })
	names, clash := uniqueUnits(names)
	if len(names) == 0 {
		names = []*source.Unit{source.LooseUnitValue()} // a Config alone is still checked
	}
	counted := diag.NewPosSet()
	for _, d := range configs {
		counted.Add(d.Identity())
	}
	// The Config's own findings are about the repository, not a unit:
	// kept once, from the first unit's reading of it.
	var configDiags diag.List
	passes := make([]*pass, len(names))
	sev := severities()
	for i, u := range names {
		p := &pass{
			unit:       u,
			opts:       opts,
			severities: sev,
			catalog:    catalog,
			secrets:    map[ref]*secret{},
			classes:    map[ref]*sandboxClass{},
			defined:    newDefinedIndex(opts.keyHash),
			pending:    map[ref]diag.List{},
			invalid:    map[string]bool{},
			counted:    counted,
		}
		if catErr != nil {
			// The built-in catalog is compiled in; this is a bug in keyhole.
			p.diags = append(p.diags, diag.Diagnostic{Code: codeConfigInvalid, Severity: diag.Error, Message: catErr.Error()})
		}
		// An engine that applies the unit in a namespace of its own
		// places there what names none.
		p.opts.DefaultNamespace = cmp.Or(u.Namespace, opts.DefaultNamespace)
		p.setOperator()
		// The Config comes first wherever it stands: it extends the
		// catalog the agents are checked against.
		mark := len(p.diags)
		for _, d := range configs {
			p.addConfig(v, d, item{doc: d})
		}
		if i == 0 {
			configDiags = slices.Clone(p.diags[mark:])
		}
		p.diags = p.diags[:mark]
		passes[i] = p
	}
	dgs := digestAll(docs, v, passes[0].plan.Operator, opts.Parallelism)
	for i, u := range names {
		passes[i].digests = dgs
		for _, d := range byUnit[u] {
			passes[i].add(v, d)
		}
		passes[i].conns = newConnIndex(passes[i].connList)
	}
	for _, p := range passes {
		p.units = passes
		for _, c := range table() {
			if c.run != nil {
				c.run(p)
			}
		}
		switch {
		case !opts.OmitPlans:
			p.resolve()
			p.checkCeiling()
		case len(p.config.ceiling.Limits) > 0:
			// The ceiling is proven on the plan, which is then dropped.
			p.resolve()
			p.checkCeiling()
			p.plan.Sandboxes, p.plan.Agents, p.plan.Ceiling = nil, nil, access.Ceiling{}
		}
	}
	res := Result{Objects: counted.Len(), Gate: gateOf(docs, configs, dgs)}
	all := append(slices.Clone(opts.Loaded), configDiags...)
	all = append(all, clash...)
	for _, p := range passes {
		p.settleSecrets()
		for i := range p.diags {
			p.diags[i].Units = []string{p.unit.Name}
			p.diags[i].Message += variableNote(p.diags[i], p.unit)
		}
		all = append(all, p.diags...)
		res.Units = append(res.Units, Unit{Unit: *p.unit, Plan: p.plan})
	}
	if len(res.Units) == 1 {
		res.Plan = res.Units[0].Plan
	}
	res.Diagnostics = redactCredentials(merge(all, len(names) > 1))
	passes[0].applyConfigIgnores(res.Diagnostics)
	res.Diagnostics = dropMissing(res.Diagnostics)
	res.Diagnostics.Sort()
	return res
}

// dropMissing removes the errors that say an object is not in the input when a
// file of the input stopped at a syntax error that is not silenced: the
// object may be declared after it, and the file's YAMLInvalid, which
// fails the check, is the one message to act on. Fixed, the file is
// read whole, and what is still missing is said then.
func dropMissing(ds diag.List) diag.List {
	unsilenced := slices.DeleteFunc(slices.Clone(ds), func(d diag.Diagnostic) bool { return d.Suppressed != "" })
	if len(source.Unparsed(unsilenced)) == 0 {
		return ds
	}
	missing := []string{codeBindingConnectionMissing, codeBindingClassMissing, codeAgentConnectionMissing, codeSecretMissing}
	// A warning (a missing Secret with --allow-missing-secrets) fails
	// nothing and stays.
	return slices.DeleteFunc(ds, func(d diag.Diagnostic) bool { return d.Severity == diag.Error && slices.Contains(missing, d.Code) })
}

// ref names a namespaced object.
type ref struct{ namespace, name string }

func (r ref) String() string {
	if r.namespace == "" {
		return r.name
	}
	return r.namespace + "/" + r.name
}

// item is one checked object: where it came from and what it is. The
// compiler keeps one per object, so it holds no more than it must: what
// the object is comes from its document (see obj), and what its ignore
// annotation names is read only when a diagnostic is reported (see
// ignores).
type item struct {
	doc *source.Document
	// ns is the namespace the object is in: its own, else the default
	// namespace (Options.DefaultNamespace), where render places it.
	ns string
	// annotated is true when the object's ignore annotation applies to
	// what is reported about it: true for every object add indexes.
	annotated bool
}

// ignores reports whether the object's ignore annotation names code,
// read from its digest (dg), else from its tree.
func (it *item) ignores(dg *digested, code string) bool {
	if !it.annotated {
		return false
	}
	var codes []string
	if dg != nil {
		codes = dg.ignoreList()
	} else {
		codes = ignoreList(annotations(it.doc.Node))
	}
	return slices.Contains(codes, code)
}

// obj is what the object is: its document's apiVersion, kind, namespace
// and name.
func (it *item) obj() diag.Object { return it.doc.Object() }

func (it *item) ref() ref { return ref{it.ns, it.obj().Name} }

type connection struct {
	item
	w *connectionWire
}

// connIndex is a pass's Connections sorted by reference, for lookups by
// it: a pointer a Connection, where a map from ref took some 77 bytes.
// A pass holds one Connection per reference (DuplicateObject drops the
// others).
type connIndex []*connection

// newConnIndex returns the index of conns.
func newConnIndex(conns []*connection) connIndex {
	ix := connIndex(slices.Clone(conns))
	slices.SortStableFunc(ix, func(a, b *connection) int { return compareRefs(a.ref(), b.ref()) })
	return ix
}

func compareRefs(a, b ref) int {
	return cmp.Or(strings.Compare(a.namespace, b.namespace), strings.Compare(a.name, b.name))
}

// get returns the Connection r names, nil when none.
func (ix connIndex) get(r ref) *connection {
	i, ok := slices.BinarySearchFunc(ix, r, func(c *connection, r ref) int { return compareRefs(c.ref(), r) })
	if !ok {
		return nil
	}
	return ix[i]
}

// secretName is the name of the Secret the Connection reads.
func (c *connection) secretName() string { return c.w.Spec.Credential.SecretRef.Name }

type secret struct {
	item
	// values maps each key to its decoded value; known is false for a key
	// whose value is not in the input (e.g. undecodable base64).
	values secretKeys
	// declared is what only a Secret declared in other ways carries, nil
	// for a plain Secret, which most are: read it through decl, write it
	// through edit.
	declared *secretDeclared
	// keysUnknown is true when the input cannot list every key the Secret
	// will hold (an ExternalSecret with dataFrom), so no key can be called
	// missing; decl().unknownWhy says why, for ConnectionKeysUnknown.
	keysUnknown bool
	// merges is true while the Secret is declared only by ExternalSecrets
	// whose creationPolicy is Merge or CreateOrMerge: they add their keys
	// to a Secret that something else creates, whose other keys the input
	// does not show. Indexed beside the Secret they merge into, they are no
	// duplicate of it, and its keys are the union (see indexSecret).
	merges bool
	// replacedAny is true when an ExternalSecret's template drops whatever
	// its spec.dataFrom fetches (see secretDeclared.replaced).
	replacedAny bool
	// invalid is true when the Secret failed its own checks: they say
	// what is wrong, and the Connection's key checks do not run on it.
	invalid bool
	// read is true once a Connection reads the Secret (in any unit):
	// its set-aside findings are reported then (see settleSecrets).
	read bool
}

// secretDeclared is what a Secret declared other than as a plain Secret
// (a SealedSecret, an ExternalSecret, a SOPS-encrypted Secret) carries
// for messages. It is shared by the copies of a secret, so it is never
// written in place: edit gives each writer its own.
type secretDeclared struct {
	// from names what declares the Secret, for messages; see
	// secrets_sources.go.
	from string
	// unknownWhy says why keysUnknown is true.
	unknownWhy string
	// replaced names the keys an ExternalSecret fetches that its template
	// drops (the template's mergePolicy is Replace), and replacedBy names
	// the ExternalSecret, for ConnectionSecretKeyMissing's message.
	replaced   []string
	replacedBy string
}

// undeclared is what decl returns for a plain Secret; never written.
var undeclared secretDeclared

// decl returns what the Secret's declaration carries, to read only.
func (s *secret) decl() *secretDeclared {
	if s.declared == nil {
		return &undeclared
	}
	return s.declared
}

// edit returns what the Secret's declaration carries, to write: a copy
// of its own, since a copy of the secret may share the one it had.
func (s *secret) edit() *secretDeclared {
	d := *s.decl()
	d.replaced = slices.Clip(d.replaced)
	s.declared = &d
	return s.declared
}

// secretKeys are a Secret's keys in order, each with what its value is
// fit for: a map per Secret cost ten times as much, for the one or two
// keys most hold.
type secretKeys []secretKey

type secretKey struct {
	name string
	v    secretValue
}

// get returns what key k's value is fit for, and whether the Secret has k.
func (ks secretKeys) get(k string) (secretValue, bool) {
	i, ok := slices.BinarySearchFunc(ks, k, func(e secretKey, k string) int { return strings.Compare(e.name, k) })
	if !ok {
		return secretValue{}, false
	}
	return ks[i].v, true
}

// set records key k, replacing what was recorded of it.
func (ks *secretKeys) set(k string, v secretValue) {
	i, ok := slices.BinarySearchFunc(*ks, k, func(e secretKey, k string) int { return strings.Compare(e.name, k) })
	if ok {
		(*ks)[i].v = v
		return
	}
	*ks = slices.Insert(*ks, i, secretKey{k, v})
}

type secretValue struct {
	known bool
	// fault is why the value cannot go into a header, from
	// config.HeaderValue, as 1 + its index in valueFaults (0 for none):
	// a byte, where the error was 16 in every key of every Secret. The
	// value itself is never kept.
	fault uint8
}

// valueFaults are the errors config.HeaderValue returns, as
// secretValue.fault counts them; one it does not name is errValueOther.
var valueFaults = [...]error{config.ErrValueEmpty, config.ErrValueLineBreak, config.ErrValueNUL, config.ErrValueControl, errValueOther}

var errValueOther = errors.New("the value cannot go into a header")

// plainValue is a value the input holds in plaintext: known, and checked
// for what cannot go into a header. The value itself is not kept.
func plainValue(b []byte) secretValue {
	_, err := config.HeaderValue(b)
	v := secretValue{known: true}
	if err != nil {
		i := slices.Index(valueFaults[:], err)
		if i < 0 {
			i = len(valueFaults) - 1
		}
		v.fault = uint8(i + 1)
	}
	return v
}

// err is why the value cannot go into a header, nil when it can.
func (v secretValue) err() error {
	if v.fault == 0 {
		return nil
	}
	return valueFaults[v.fault-1]
}

type sandboxClass struct {
	item
	w *sandboxClassWire
}

type owner struct {
	item
	w *bindingOwnerWire
}

// pass is the state of the compilation of one deploy unit.
type pass struct {
	// origins says, per sandbox (sandboxKey) and host, where the host of
	// its proxy config comes from; kept only when there is a ceiling.
	origins map[string]map[string]origin
	unit    *source.Unit
	opts    Options
	diags   diag.List
	// kindUnknownSaid holds the positions this unit said KindUnknown
	// at.
	kindUnknownSaid map[diag.Pos]bool
	// severities is the check table's severity of each code (severity).
	severities map[string]diag.Severity
	// units are every unit's pass, this one's included, in order of
	// name, for the Secrets a unit finds in another (see secretOf).
	units []*pass
	// counted holds the position of every object checked, shared by all
	// units, so that an object two units build counts once.
	counted *diag.PosSet
	// defined indexes the objects of keyhole's kinds by kind and name,
	// for DuplicateObject.
	defined definedIndex
	// pending holds the diagnostics about a Secret (or its stand-in) that
	// a walk found, reported only once a Connection reads it (see
	// settleSecrets); secret.read marks those that one does.
	pending map[ref]diag.List
	// lazyDups are the DuplicateObject findings about walked Secrets,
	// written only when reported (see indexSecret).
	lazyDups []lazyDup
	// invalid holds the objects of keyhole's kinds that failed their
	// schema, by kind and reference (and by kind and name alone, for an
	// agent's connection label), so that what names them is not also
	// reported as naming something missing.
	invalid map[string]bool
	// lastSecret is the reference indexSecret last indexed, and the
	// document that declared it, for deferSecret.
	lastSecret    ref
	lastSecretDoc *source.Document

	// conns finds the Connections by reference, once every document is
	// added (see connIndex).
	conns   connIndex
	secrets map[ref]*secret
	// stand holds the Secrets a ClusterExternalSecret makes in the
	// namespaces its selector picks, which a Connection whose Secret is
	// in no unit may read, and why a Secret named is not created
	// (selectors.go).
	stand   standIns
	classes map[ref]*sandboxClass
	owners  []*owner
	// sandboxPods are the Sandboxes and SandboxTemplates whose pods name
	// Secrets, for AgentSandboxSecretExposed.
	sandboxPods []sandboxPod
	// connList keeps Connections in input order for deterministic checks.
	connList []*connection
	agents   []*agent
	catalog  map[string]schema.Connector
	config   repoConfig

	plan Plan
	// digests are the documents' digests that Compile made (see
	// digestAll).
	digests digests
}

// add indexes one document by kind, with what its digest found.
func (p *pass) add(v *schema.Validator, doc *source.Document) {
	if doc.Node == nil && !doc.Released() {
		return
	}
	it := item{doc: doc, annotated: true}
	dg := p.digests.of(doc)
	// Read once here: for a document that kept its tree, obj walks it.
	obj := it.obj()
	it.ns = cmp.Or(obj.Namespace, p.opts.DefaultNamespace)
	if isConfig(obj) {
		p.count(doc)
		return // read first, by addConfig
	}
	mark := len(p.diags)
	if p.addSecretSource(v, &it) {
		p.deferSecret(&it, mark)
		return
	}
	if k, ok := schema.LookupAgentSandbox(obj.APIVersion, obj.Kind); ok {
		p.addAgentSandbox(&it, dg, k)
		return
	}
	kind, ok := schema.Lookup(obj.APIVersion, obj.Kind)
	if !ok {
		if !doc.IsAgent() && obj.Kind != "" {
			var kindAt diag.Pos
			if dg != nil && dg.more != nil {
				kindAt = dg.more.kindAt
			}
			if p.misspelledKind(&it, kindAt) {
				p.count(doc)
				return
			}
			// One document a unit's build writes several times (a
			// component each of several kustomizations uses, in a
			// namespace of its own) is one kind at one place: said once.
			at := cmp.Or(kindAt, doc.Pos)
			if p.kindUnknownSaid[at] {
				return
			}
			if p.kindUnknownSaid == nil {
				p.kindUnknownSaid = map[diag.Pos]bool{}
			}
			p.kindUnknownSaid[at] = true
			msg := fmt.Sprintf("%s %s is not a kind keyhole checks; skipped", obj.APIVersion, obj.Kind)
			if kindAt.Line > 0 {
				p.diags = append(p.diags, p.diagnostic(codeKindUnknown, &it, kindAt, "kind", msg))
			} else {
				p.report(codeKindUnknown, &it, path{"kind"}, false, "%s", msg)
			}
			if dg != nil && dg.more != nil {
				p.nested(&it, dg.more.nested)
			}
		}
		return
	}
	p.count(doc)
	if kind == schema.KindSecret {
		defer p.deferSecret(&it, mark)
	}
	if p.duplicate(kind, &it, dg) {
		return
	}
	if vs := dg.schemaFindings(); slices.ContainsFunc(vs, func(vi schema.Violation) bool { return !unknownUntilDeploy(p.unit, vi) }) {
		for _, vi := range vs {
			pos, msg := violationAt(doc, vi.Line, vi.Column, vi.Path, vi.Message)
			code := codeSchemaInvalid
			if unknownUntilDeploy(p.unit, vi) {
				code, msg = codeValueUnknown, valueUnknownMessage(msg)
			}
			p.diags = append(p.diags, p.diagnostic(code, &it, pos, vi.Path, msg))
		}
		// What names it is not told it is missing: its own findings
		// say what is wrong with it.
		p.invalid[string(kind)+"/"+it.ref().String()] = true
		if kind == schema.KindAgent || kind == schema.KindConnection {
			p.invalid[string(kind)+"/"+obj.Name] = true
		}
		if kind == schema.KindSecret {
			// Still a Secret a Connection can name: its own findings
			// stand for whatever the Connection would find in it.
			p.indexSecret(it.ref(), &secret{item: it, values: nil, keysUnknown: true, invalid: true})
		}
		return
	}
	for _, vi := range dg.schemaFindings() {
		// Read all the same (digest): only values Flux completes at
		// deploy, which keyhole cannot know.
		pos, msg := violationAt(doc, vi.Line, vi.Column, vi.Path, vi.Message)
		p.diags = append(p.diags, p.diagnostic(codeValueUnknown, &it, pos, vi.Path, valueUnknownMessage(msg)))
	}
	if kind == schema.KindAgentRuntime || kind == schema.KindToolRegistry {
		p.checkOperatorObject(&it, dg, kind)
	}
	if dg.more != nil && dg.more.unreadable != "" {
		// The schema let through a shape the wire type cannot hold: said
		// rather than ignored.
		p.report(codeSchemaInvalid, &it, nil, false, "cannot read %s: %s", obj.Kind, dg.more.unreadable)
		return
	}
	switch w := dg.wire.(type) {
	case *connectionWire:
		p.keep(&it)
		p.connList = append(p.connList, &connection{item: it, w: w})
	case *secretDigest:
		p.checkSecretKeyNames(&it, w.refused())
		if w.mirror != nil {
			p.indexSecret(it.ref(), &secret{item: it, keysUnknown: true, declared: w.mirror})
			break
		}
		p.indexSecret(it.ref(), &secret{item: it, values: w.values})
	case *sandboxClassWire:
		c := &sandboxClass{item: it, w: w}
		p.keep(&it)
		p.classes[c.ref()] = c
	case *agentWire:
		p.agents = append(p.agents, &agent{item: it, w: w})
	case *bindingOwnerWire:
		p.keep(&it)
		p.owners = append(p.owners, &owner{item: it, w: w})
	}
}

// count records an object checked.
func (p *pass) count(doc *source.Document) { p.counted.Add(doc.Identity()) }

// keep lists an omnia object that passed its schema in the Plan, for
// targets that re-emit the inputs.
func (p *pass) keep(it *item) {
	if p.opts.OmitObjects || p.opts.OmitPlans {
		return
	}
	p.plan.Objects = append(p.plan.Objects, Object{Source: it.obj(), Pos: it.doc.Pos, Node: it.doc.Node, doc: it.doc})
}

// decode fills a wire type from a document that passed its schema, for
// what declares a Secret in other ways. A failure here means the schema
// let through a shape the wire type cannot hold; it is reported rather
// than ignored.
func (p *pass) decode(doc *source.Document, it *item, out any) bool {
	n, err := doc.Tree()
	if err == nil {
		err = n.Decode(out)
	}
	if err != nil {
		p.report(codeSchemaInvalid, it, nil, false, "cannot read %s: %s", it.obj().Kind, strings.TrimPrefix(err.Error(), "yaml: "))
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

// secretValues is what each of a Secret's values is fit for.
func secretValues(w secretWire) secretKeys {
	var values secretKeys
	for k, v := range w.Data {
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			values.set(k, secretValue{})
			continue
		}
		values.set(k, plainValue(b))
	}
	// stringData wins over data for the same key, as the API server merges it.
	for k, v := range w.StringData {
		values.set(k, plainValue([]byte(v)))
	}
	return values
}

func (s *secret) keys() []string {
	ks := make([]string, len(s.values))
	for i, k := range s.values {
		ks[i] = k.name
	}
	return ks
}

// secretOf returns the Secret a Connection reads, and its reference: from
// the Connection's own deploy unit, else from the first other unit that
// holds it (a cluster applies several units; Secrets are often kept in a
// unit of their own). Either way the Secret is marked as read.
func (p *pass) secretOf(c *connection) (*secret, ref) {
	sr := c.w.Spec.Credential.SecretRef
	r := ref{namespace: cmp.Or(sr.Namespace, c.ns), name: sr.Name}
	if sr.Name == "" {
		return nil, r // none named: the proxy's own identity, or checkWorkloadIdentity says so
	}
	if s := p.secrets[r]; s != nil {
		s.read = true
		return s, r
	}
	for _, o := range p.units {
		if s := o.secrets[r]; s != nil && o != p && o.unit.Cluster == p.unit.Cluster {
			s.read = true
			return s, r
		}
	}
	if s := p.selectedSecret(r); s != nil {
		s.read = true
		return s, r
	}
	return nil, r
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
	pos, note := it.doc.Pos, ""
	msg := fmt.Sprintf(format, args...)
	// A finding the object's annotation suppresses is placed at its
	// document: finding the field would read a released document's file
	// again, for every such finding, to place what is only counted.
	if code == codeAccessAboveCeiling || !it.ignores(p.digests.of(it.doc), code) {
		var root *yaml.Node
		if root, note = it.tree(); root != nil {
			n := at.find(root, key)
			if pos, note = it.doc.Where(n); it.doc.Copied(n) {
				msg = copied(msg, note, n)
			}
		}
	}
	p.diags = append(p.diags, p.diagnostic(code, it, pos, at.String(), msg+note))
}

// reportUse reports on a key use, pointing at the reference itself inside
// a template value where the column can be known exactly.
func (p *pass) reportUse(code string, it *item, u keyUse, format string, args ...any) {
	root, note := it.tree()
	pos, at := it.doc.Pos, u.at()
	msg := fmt.Sprintf(format, args...)
	if root != nil {
		n := at.find(root, false)
		if pos, note = it.doc.WhereColumn(n, refColumn(n, u.offset)); note != "" && it.doc.Copied(n) {
			msg = copied(msg, note, n)
		}
	}
	p.diags = append(p.diags, p.diagnostic(code, it, pos, at.String(), msg+note))
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

// severity is code's default severity in the check table, Error for a
// code the table lacks.
func (p *pass) severity(code string) diag.Severity {
	if s, ok := p.severities[code]; ok {
		return s
	}
	return diag.Error
}

func (p *pass) diagnostic(code string, it *item, pos diag.Pos, fieldPath, msg string) diag.Diagnostic {
	d := diag.Diagnostic{Code: code, Severity: p.severity(code), Pos: pos, Object: it.obj(), Path: fieldPath, Message: msg}
	if code == codeSecretMissing && p.opts.AllowMissingSecrets {
		d.Severity = diag.Warning
	}
	// The ceiling is the platform's, in keyhole.yaml: an object's own
	// annotation cannot silence what it says about that object.
	if code != codeAccessAboveCeiling && it.ignores(p.digests.of(it.doc), code) {
		d.Suppressed = "annotation"
		if p.opts.OmitSuppressedMessages {
			d.Message = ""
		}
	}
	return d
}

// unknownUntilDeploy reports whether the schema finding vi of an object
// of unit u is about a value holding a variable that u's Flux
// Kustomization substitutes at deploy and keyhole left as written: one a
// Secret gives, whose values keyhole never reads, or an object the
// repository does not hold in the clear (docs/inputs.md). Every other
// variable such a unit's build has substituted already.
func unknownUntilDeploy(u *source.Unit, vi schema.Violation) bool {
	return u != nil && u.Flux != nil && strings.Contains(vi.Message, "${")
}

// valueUnknownMessage is the FluxValueUnknown message for the schema
// finding msg.
func valueUnknownMessage(msg string) string {
	return "unknown until deploy, so not checked as written (" + msg + "): Flux substitutes the variable from a Secret, whose values keyhole never reads, or from an object the repository does not hold in the clear; the object's other fields are checked"
}

// variableNote explains a schema finding about a value that still holds
// a GitOps engine's variable (${NAME}): why keyhole did not substitute
// it, which depends on whether a Flux Kustomization builds the unit.
func variableNote(d diag.Diagnostic, u *source.Unit) string {
	if d.Code != codeSchemaInvalid || !strings.Contains(d.Message, "${") {
		return ""
	}
	if u.Flux != nil {
		return "; the variable is one keyhole leaves as written: Flux substitutes it from a Secret, whose values keyhole never reads, or from an object the repository does not hold in the clear"
	}
	return "; ${...} is a variable Flux's postBuild substitutes, and keyhole substitutes it only in a deploy unit a Flux Kustomization of the repository builds: check the repository from its root, where the Kustomization that builds this file is found"
}

// uniqueUnits returns units (sorted by name) without those that share a
// name with one before them, each such an error at its declaration: diff,
// render and --unit take a unit by its name, so two under one would be
// compared and written as whichever came last. The unit sources name
// their units apart (source.Unit); this holds it should one not.
func uniqueUnits(units []*source.Unit) ([]*source.Unit, diag.List) {
	var out []*source.Unit
	var ds diag.List
	for _, u := range units {
		if n := len(out); n > 0 && out[n-1].Name == u.Name && out[n-1].ID != u.ID {
			prev := out[n-1]
			ds = append(ds, diag.Diagnostic{Code: source.CodeInputInvalid, Severity: diag.Error, Pos: u.Decl,
				Message: fmt.Sprintf("deploy unit %q (%s) has the name of the one declared at %s (%s), so neither could be told apart in a diff or a render; rename one", u.Name, u.Source, prev.Decl, prev.Source)})
			continue
		}
		out = append(out, u)
	}
	return out, ds
}
