package compiler

import (
	"slices"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// Digest returns what source.Options.Digest takes: for each document as
// the loader parses it, on the loader's workers, what Compile needs of it
// (its schema findings, and for the kinds the checks read, the object
// packed: see packedConnection), so that the loader can drop the node trees of the documents
// most repositories are made of. The trees of the rest stay: a kind the
// operator's schemas also check (those depend on the Config's operator
// version, read later), a Config, what declares a Secret in other ways,
// and any document that failed its schema or could not be decoded.
//
// An AgentRuntime or ToolRegistry is checked here against the operator
// opts.OperatorVersion names, else the default one; when keyhole.yaml
// names another, Compile reads its tree again to check it against that.
//
// Compile gives the same Result with or without a Digest: a diagnostic
// about a released document reads its tree again for the position.
func Digest(v *schema.Validator, opts Options) source.Digest {
	op := schema.DefaultOperator()
	if o, err := schema.LookupOperator(opts.OperatorVersion); opts.OperatorVersion != "" && err == nil {
		op = o
	}
	in := newInterner()
	return func(d *source.Document) (any, bool) {
		dg := digestOf(v, op, in, d)
		if dg == nil {
			return nil, false
		}
		return dg, dg.release
	}
}

// digested is what Digest took of one document.
type digested struct {
	// wire is the object packed: *connectionDigest, *ownerDigest,
	// *secretDigest, or an *anyDigest of a sandboxClassWire or an
	// agentWire.
	wire any
	// more is what only some documents need, nil for the rest: a digest
	// is kept for every document, so it is kept small (32 bytes).
	more *digestMore
	// kind is the keyhole kind, as its index in digestKinds (0 for a kind
	// keyhole does not check): a byte, where the string would be 16.
	kind uint8
	// validated is true when the document's schema findings were taken
	// (more.schema, none when more is nil).
	validated bool
	release   bool
	// operator is the operator release an AgentRuntime or ToolRegistry
	// was checked against, as 1 + its index in operatorVersions, 0 when
	// none was: a byte, where its name took a digestMore of 144 bytes for
	// every such object. more.opFindings holds what the check found.
	// sandbox is true when the object sets spec.sandbox.
	operator uint8
	sandbox  bool
}

// operatorVersions are the operator releases keyhole knows, as
// digested.operator counts them.
var operatorVersions = sync.OnceValue(schema.OperatorVersions)

// checkedAgainst reports whether the digest holds what checking the
// document against op's schemas found (see opFindings).
func (dg *digested) checkedAgainst(op schema.Operator) bool {
	return dg.operator > 0 && operatorVersions()[dg.operator-1] == op.Version
}

// opFindings returns what checking the document against the operator's
// schemas found.
func (dg *digested) opFindings() []schema.Violation {
	if dg.more == nil {
		return nil
	}
	return dg.more.opFindings
}

// digestKinds are the kinds a digest records, by index; the first is
// none. schema.Lookup returns no other (TestDigestKinds).
var digestKinds = [...]schema.Kind{"", schema.KindConnection, schema.KindSandboxClass, schema.KindAgentRuntime,
	schema.KindToolRegistry, schema.KindSecret, schema.KindAgent, schema.KindConnector}

// kindIndex is k's index in digestKinds; ok is false for a kind not there.
func kindIndex(k schema.Kind) (i uint8, ok bool) {
	for j, dk := range digestKinds {
		if dk == k {
			return uint8(j), true
		}
	}
	return 0, false
}

// schemaKind is the keyhole kind the digest records, "" for none.
func (dg *digested) schemaKind() schema.Kind { return digestKinds[dg.kind] }

// DigestObject says what the document is, from its packed object, for
// the loader (source.ObjectDigest): ok is false when there is none.
func (dg *digested) DigestObject() (diag.Object, bool) {
	var md *metadata
	apiVersion := schema.Group
	switch w := dg.wire.(type) {
	case *connectionDigest:
		m := w.p.metadata()
		md = &m
	case *anyDigest[sandboxClassWire]:
		md = &w.p.wire().Metadata
	case *ownerDigest:
		m := w.p.metadata()
		md = &m
	case *secretDigest:
		m := w.p.metadata()
		md, apiVersion = &m, "v1"
	case *anyDigest[agentWire]:
		return diag.Object{Kind: source.AgentKind, Name: w.p.wire().Name}, true
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
	// kindAt is where the kind of a kind keyhole does not check is
	// written, for the note that says it is skipped.
	kindAt diag.Pos
	// agentName is an agent's name as duplicate reads it.
	agentName string
	// opFindings is what checking an AgentRuntime or ToolRegistry against
	// the operator's schemas found (see digested.operator).
	opFindings []schema.Violation
	// credentials are the token-shaped strings of a Connection or an
	// agent (see findCredentials): where, never what.
	credentials []credentialFinding
}

// connectionDigest is a Connection, packed (see packedConnection).
type connectionDigest struct {
	p packedConnection
}

// anyDigest is an object of another wire type, packed (see packedAny).
type anyDigest[T any] struct {
	p packedAny[T]
}

// ownerDigest is an AgentRuntime or ToolRegistry, packed (see
// packedOwner).
type ownerDigest struct {
	p packedOwner
}

// secretDigest is a Secret's keys and what each value is fit for, packed
// (see packedSecret); the values themselves are not kept.
type secretDigest struct {
	p packedSecret
}

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
	kind, ok := schema.Lookup(obj.APIVersion, obj.Kind)
	if !ok {
		if n := source.Lookup(d.Node, "kind"); n != nil {
			dg.extra().kindAt = diag.Pos{File: d.File, Line: n.Line, Column: n.Column}
		}
		dg.release = true
		return in.digest(dg)
	}
	ki, known := kindIndex(kind)
	if !known {
		return dg // not one a digest records: the compiler reads the tree
	}
	dg.kind = ki
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
	dg.validated = true
	if vs := v.Validate(kind, d.Node); len(vs) > 0 {
		dg.extra().schema = vs
		return dg
	}
	var err error
	switch kind {
	case "Connection":
		var w connectionWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = in.connection(&w)
		}
	case "SandboxClass":
		var w sandboxClassWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = packedDigest(in, &w)
		}
	case schema.KindAgent:
		var w agentWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = packedDigest(in, &w)
		}
	case "AgentRuntime", "ToolRegistry":
		sp, _ := child(d.Node, "spec")
		sb, _ := child(sp, "sandbox")
		if vs := v.ValidateOperator(op, kind, d.Node); len(vs) > 0 {
			dg.extra().opFindings = vs
		}
		// A version keyhole does not know (LookupOperator returns none)
		// counts as unchecked: Compile checks the tree again.
		dg.operator, dg.sandbox = uint8(slices.Index(operatorVersions(), op.Version)+1), sb != nil
		var w bindingOwnerWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = in.owner(&w)
		}
	case "Secret":
		var w secretWire
		if err = d.Node.Decode(&w); err == nil {
			dg.wire = in.secret(w.Metadata, secretValues(w), refusedKeys(w))
		}
	default:
		return dg
	}
	if err != nil {
		return dg // decode reports it, from the tree
	}
	dg.release = true
	return in.digest(dg)
}

// digestOfDoc returns what Digest took of doc, nil when nothing.
func digestOfDoc(doc *source.Document) *digested {
	dg, _ := doc.Digested().(*digested)
	return dg
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
