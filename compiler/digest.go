package compiler

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/parallel"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// Digest returns what source.Options.Digest takes: for each document as
// the loader parses it, on the loader's workers, what Compile needs of it
// (its schema findings, and for the kinds the checks read, the object
// decoded into its wire type and copied apart from the parser's memory:
// see arena), so that the loader can drop the node trees of the documents
// most repositories are made of. The trees of the rest stay: a Config,
// what declares a Secret in other ways, and any document that failed its
// schema or could not be decoded.
//
// An AgentRuntime or ToolRegistry is checked against the operator
// opts.OperatorVersion names, else the one the first Config it is given
// names (the loader reads the keyhole.yaml that governs the paths before
// it walks them), else the default one. Compile digests again, from its
// tree, a document digested for another operator than its own (see
// digestAll): one whose keyhole.yaml only the walk found, or that a
// source.Memo carries over from a load under another keyhole.yaml.
//
// Compile gives the same Result with or without a Digest: it digests
// itself what the loader did not, and a diagnostic about a released
// document reads its tree again for the position.
func Digest(v *schema.Validator, opts Options) source.Digest {
	d := &digester{v: v, in: newInterner(), op: schema.DefaultOperator(), settled: opts.OperatorVersion != ""}
	if op, err := schema.LookupOperator(opts.OperatorVersion); opts.OperatorVersion != "" && err == nil {
		d.op = op
	}
	return func(doc *source.Document) (any, bool) {
		dg := digestOf(d.v, d.operator(doc), d.in, doc)
		if dg == nil {
			return nil, false
		}
		return dg, dg.release
	}
}

// digester is the state of one Digest.
type digester struct {
	v  *schema.Validator
	in *interner
	mu sync.Mutex
	// op is the operator AgentRuntimes and ToolRegistries are checked
	// against; settled is true once the flag or a Config named it.
	op      schema.Operator
	settled bool
}

// operator returns the operator to check doc against: a Config settles
// it, when the flag did not and no Config did before.
func (d *digester) operator(doc *source.Document) schema.Operator {
	cfg := doc.Node != nil && isConfig(doc.Object())
	d.mu.Lock()
	defer d.mu.Unlock()
	if cfg && !d.settled {
		d.settled = true
		if op, ok := configOperator(doc.Node); ok {
			d.op = op
		}
	}
	return d.op
}

// configOperator returns the operator a Config's operator section names,
// as readOperator reads it; ok is false when it names none keyhole knows.
func configOperator(n *yaml.Node) (op schema.Operator, ok bool) {
	var w configWire
	if n.Decode(&w) != nil || w.Operator.Kind != yaml.MappingNode {
		return op, false
	}
	var ow operatorWire
	if w.Operator.Decode(&ow) != nil || ow.Version == "" {
		return op, false
	}
	op, err := schema.LookupOperator(ow.Version)
	return op, err == nil
}

// digested is what Digest took of one document.
type digested struct {
	// wire is the object decoded, in the arenas: a *connectionWire,
	// *sandboxClassWire, *agentWire, *bindingOwnerWire or *secretDigest;
	// nil for a document that failed its schema, or of another kind.
	wire any
	// more is what only some documents need, nil for the rest: a digest
	// is kept for every document, so it is kept small (32 bytes).
	more *digestMore
	// kind is the keyhole kind, as 1 + its index in schema.Kinds() (0
	// for a kind keyhole does not check): a byte, where the string would
	// be 16.
	kind    uint8
	release bool
	// operator is the operator release an AgentRuntime or ToolRegistry
	// was checked against, as 1 + its index in operatorVersions;
	// more.opFindings holds what the check found. sandbox is true when
	// the object sets spec.sandbox.
	operator uint8
	sandbox  bool
}

// operatorVersions are the operator releases keyhole knows, and
// digestKinds the kinds it checks, as digested counts them; groupKinds
// are the kinds of schema.Group.
var (
	operatorVersions = sync.OnceValue(schema.OperatorVersions)
	digestKinds      = sync.OnceValue(schema.Kinds)
	groupKinds       = sync.OnceValue(schema.GroupKinds)
)

// operatorIndex is op as digested.operator counts it.
func operatorIndex(op schema.Operator) uint8 {
	return uint8(slices.Index(operatorVersions(), op.Version) + 1)
}

// kindIndex is k as digested.kind counts it, 0 for a kind not there.
func kindIndex(k schema.Kind) uint8 {
	return uint8(slices.Index(digestKinds(), k) + 1)
}

// schemaKind is the keyhole kind the digest records, "" for none.
func (dg *digested) schemaKind() schema.Kind {
	if dg.kind == 0 {
		return ""
	}
	return digestKinds()[dg.kind-1]
}

// DigestObject says what the document is, from its decoded object, for
// the loader (source.ObjectDigest): ok is false when there is none.
func (dg *digested) DigestObject() (diag.Object, bool) {
	var md metadata
	apiVersion := schema.Group
	switch w := dg.wire.(type) {
	case *connectionWire:
		md = w.Metadata
	case *sandboxClassWire:
		md = w.Metadata
	case *bindingOwnerWire:
		md = w.Metadata
	case *secretDigest:
		md, apiVersion = w.metadata, "v1"
	case *agentWire:
		return diag.Object{Kind: source.AgentKind, Name: w.Name}, true
	default:
		return diag.Object{}, false
	}
	return diag.Object{APIVersion: apiVersion, Kind: string(dg.schemaKind()), Namespace: md.Namespace, Name: md.Name}, true
}

// ignoreList returns the codes the document's ignore annotation names.
func (dg *digested) ignoreList() []string {
	if dg.more == nil {
		return nil
	}
	return dg.more.ignore
}

// schemaFindings returns the document's schema findings.
func (dg *digested) schemaFindings() []schema.Violation {
	if dg.more == nil {
		return nil
	}
	return dg.more.schema
}

// extra returns more, allocated when it was nil.
func (dg *digested) extra() *digestMore {
	if dg.more == nil {
		dg.more = new(digestMore)
	}
	return dg.more
}

type digestMore struct {
	ignore []string
	schema []schema.Violation
	// unreadable is why a document that passed its schema could not be
	// decoded into its wire type (the schema let a shape through that
	// the type cannot hold).
	unreadable string
	// kindAt is where the kind of a kind keyhole does not check is
	// written, for the note that says it is skipped.
	kindAt diag.Pos
	// nested are keyhole's objects written inside an object of a kind
	// keyhole does not check (nestedObjects).
	nested []nestedObject
	// agentName is an agent's name as duplicate reads it.
	agentName string
	// opFindings is what checking an AgentRuntime or ToolRegistry against
	// the operator's schemas found (see digested.operator).
	opFindings []schema.Violation
	// agentSandbox is what checking an agent-sandbox object against its
	// CRD found; podSecrets the Secrets a valid Sandbox's or
	// SandboxTemplate's pod names.
	agentSandbox []schema.Violation
	podSecrets   []podSecretUse
	// credentials are the token-shaped strings of a Connection or an
	// agent (see findCredentials): where, never what.
	credentials []credentialFinding
}

// secretDigest is a Secret's keys and what each value is fit for; the
// values themselves are not kept.
type secretDigest struct {
	metadata metadata
	// values is read, never written: a Secret merged with another
	// copies it (see mergedSecret).
	values secretKeys
	// refusedKeys are the keys the API server refuses, for their
	// findings; nil for the Secrets, nearly all, that have none.
	refusedKeys *refusedKeyLists
	// mirror, when set, says the Secret is a mirror whose data a
	// controller copies from another Secret (secrets_mirrored.go): its
	// keys are unknown. Shared, never written.
	mirror *secretDeclared
}

// refusedKeyLists are the keys of a Secret's data and stringData the API
// server refuses, each list sorted.
type refusedKeyLists struct{ data, stringData []string }

// refused returns the Secret with only its refused keys, without values.
func (sd *secretDigest) refused() secretWire {
	w := secretWire{Metadata: sd.metadata}
	if r := sd.refusedKeys; r != nil {
		w.Data, w.StringData = keySet(r.data), keySet(r.stringData)
	}
	return w
}

// keySet is keys as a map to empty values, nil for none.
func keySet(keys []string) map[string]string {
	if keys == nil {
		return nil
	}
	m := make(map[string]string, len(keys))
	for _, k := range keys {
		m[k] = ""
	}
	return m
}

// digestOf digests d, checking an AgentRuntime or ToolRegistry against
// op; nil for a document Compile reads from its tree (a Config, what
// declares a Secret in other ways) or that was not read.
func digestOf(v *schema.Validator, op schema.Operator, in *interner, d *source.Document) *digested {
	if d.Node == nil {
		return nil
	}
	obj := d.Object()
	if isConfig(obj) || isSecretSource(obj, d.Node) {
		return nil
	}
	in.document(obj.Kind, d.Node)
	dg := new(digested)
	if ignore := ignoreList(annotations(d.Node)); ignore != nil {
		dg.extra().ignore = ignore
	}
	if k, ok := schema.LookupAgentSandbox(obj.APIVersion, obj.Kind); ok {
		digestAgentSandbox(v, dg, k, d.Node)
		dg.release = true
		return in.digest(dg)
	}
	kind, ok := schema.Lookup(obj.APIVersion, obj.Kind)
	if !ok {
		if n := source.Lookup(d.Node, "kind"); n != nil {
			dg.extra().kindAt, _ = d.Where(n)
		}
		if ns := nestedObjects(d); ns != nil {
			dg.extra().nested = ns
		}
		dg.release = true
		return in.digest(dg)
	}
	dg.kind = kindIndex(kind)
	if kind == schema.KindConnection || kind == schema.KindAgent {
		if fs := findCredentials(d.Node); fs != nil {
			dg.extra().credentials = fs
		}
	}
	if kind == schema.KindAgent {
		if n := source.Lookup(d.Node, "name"); n != nil && n.Kind == yaml.ScalarNode {
			dg.extra().agentName = n.Value
		}
	}
	if vs := v.Validate(kind, d.Node); len(vs) > 0 {
		dg.extra().schema = vs
		if slices.ContainsFunc(vs, func(vi schema.Violation) bool { return !unknownUntilDeploy(d.Unit(), vi) }) {
			return in.digest(dg)
		}
		// Only values Flux completes at deploy, which are unknown until
		// then: the object is read, and its other fields checked.
	}
	var err error
	switch kind {
	case schema.KindConnection:
		var w connectionWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = in.connection(&w)
		}
	case schema.KindSandboxClass:
		var w sandboxClassWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = in.sandboxClass(&w)
		}
	case schema.KindAgent:
		var w agentWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = in.agent(&w)
		}
	case schema.KindAgentRuntime, schema.KindToolRegistry:
		sp, _ := child(d.Node, "spec")
		sb, _ := child(sp, "sandbox")
		if vs := v.ValidateOperator(op, kind, d.Node); len(vs) > 0 {
			dg.extra().opFindings = vs
		}
		dg.operator, dg.sandbox = operatorIndex(op), sb != nil
		var w bindingOwnerWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = in.owner(&w)
		}
	case schema.KindSecret:
		var w secretWire
		if err = d.Node.Decode(&w); err == nil {
			sd := in.secret(w.Metadata, secretValues(w), refusedKeys(w))
			sd.mirror = mirrorOf(d.Node)
			dg.wire = sd
		}
	default:
		return in.digest(dg) // a catalog entry: its schema is all there is to check
	}
	if err != nil {
		dg.extra().unreadable = strings.TrimPrefix(err.Error(), "yaml: ")
		return in.digest(dg)
	}
	dg.release = true
	return in.digest(dg)
}

// digests are the digests Compile made itself (see digestAll).
type digests map[*source.Document]*digested

// of returns the digest of doc: Compile's own, else the loader's; nil for
// a document Compile reads from its tree.
func (ds digests) of(doc *source.Document) *digested {
	if dg, ok := ds[doc]; ok {
		return dg
	}
	dg, _ := doc.Digested().(*digested)
	return dg
}

// digestAll digests, on workers goroutines (runtime.GOMAXPROCS(0) when
// workers <= 0), the documents the loader did not (those kustomize built,
// standard input's, every one when Load was given no Digest), and again
// those it digested for another operator than op. What it returns, with
// the loader's, is every document's digest.
func digestAll(docs []*source.Document, v *schema.Validator, op schema.Operator, workers int) digests {
	var todo []*source.Document
	for _, d := range docs {
		dg, _ := d.Digested().(*digested)
		switch {
		case dg == nil && d.Node != nil:
		case dg != nil && dg.operator != 0 && dg.operator != operatorIndex(op):
		default:
			continue
		}
		todo = append(todo, d)
	}
	made := make([]*digested, len(todo))
	in := newInterner()
	parallel.For(len(todo), workers, func(i int) {
		made[i] = redigest(v, op, in, todo[i])
	})
	ds := make(digests, len(todo))
	for i, d := range todo {
		if made[i] != nil {
			ds[d] = made[i]
		}
	}
	return ds
}

// redigest digests d, from its tree read again when the loader released
// it. A tree that cannot be read again keeps the loader's digest, with
// the reason as its operator finding.
func redigest(v *schema.Validator, op schema.Operator, in *interner, d *source.Document) *digested {
	if !d.Released() {
		return digestOf(v, op, in, d)
	}
	n, err := d.Tree()
	if err != nil {
		dg, _ := d.Digested().(*digested)
		c := *dg
		m := digestMore{}
		if dg.more != nil {
			m = *dg.more
		}
		m.opFindings = []schema.Violation{{Line: d.Pos.Line, Column: d.Pos.Column, Message: "cannot check it against the operator's schema: " + err.Error()}}
		c.more, c.operator = &m, operatorIndex(op)
		return &c
	}
	fresh := *d
	fresh.Node = n
	return digestOf(v, op, in, &fresh)
}

// isSecretSource reports whether addSecretSource reads the document.
func isSecretSource(o diag.Object, n *yaml.Node) bool {
	switch {
	case o.APIVersion == sealedSecretAPIVersion && o.Kind == "SealedSecret":
	case (o.APIVersion == externalSecretAPIVersion || o.APIVersion == externalSecretAPIVersionBeta) && (o.Kind == "ExternalSecret" || o.Kind == "ClusterExternalSecret"):
	case o.APIVersion == "v1" && o.Kind == "Secret" && source.Lookup(n, "sops") != nil:
	default:
		return false
	}
	return true
}

// ignoreList splits the ignore annotation's codes.
func ignoreList(ann string) []string {
	var codes []string
	for _, c := range strings.Split(ann, ",") {
		if c = strings.TrimSpace(c); c != "" {
			codes = append(codes, c)
		}
	}
	return codes
}

// refusedKeys is w with only the keys checkSecretKeyNames reports, and
// no values.
func refusedKeys(w secretWire) secretWire {
	refused := func(m map[string]string) map[string]string {
		var out map[string]string
		for k := range m {
			if config.CheckSecretKey(k) != nil {
				if out == nil {
					out = map[string]string{}
				}
				out[k] = ""
			}
		}
		return out
	}
	w.Data, w.StringData = refused(w.Data), refused(w.StringData)
	return w
}

// sortedKeys are m's keys, sorted; nil for a nil map.
func sortedKeys(m map[string]string) []string {
	if m == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// tree returns it's node tree, read again when the loader released it,
// or nil when it cannot be (its file changed since): the object's own
// position then stands for the field's, and note says why.
func (it *item) tree() (n *yaml.Node, note string) {
	n, err := it.doc.Tree()
	if err != nil {
		return nil, " (at the object, not the field: " + err.Error() + ")"
	}
	return n, ""
}
