package compiler

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// codeKindNested is reported where an object of a kind keyhole does not
// check holds one of keyhole's objects, which its controller makes in
// the cluster and keyhole never reads (docs/inputs.md, "Objects inside
// other objects").
const codeKindNested = "KindNested"

// nestedObject is one of keyhole's objects written inside an object of
// another kind: where its kind is, what it is, and the field holding it.
type nestedObject struct {
	at         diag.Pos
	kind, name string
	field      string
}

// engineReads are the API groups whose objects hold keyhole's objects
// that an engine keyhole reads renders or builds itself: a Flux
// HelmRelease's or an Argo CD Application's values, a kustomization's
// patches. What they hold is checked where the unit is, or said there.
var engineReads = []string{"argoproj.io/", "helm.toolkit.fluxcd.io/", "kustomize.toolkit.fluxcd.io/", "kustomize.config.k8s.io/"}

// maxNested bounds the nested objects said of one document.
const maxNested = 10

// nestedObjects finds keyhole's objects (of its own group, or
// agent-sandbox's) written as mappings anywhere inside d, an object of a
// kind keyhole does not check: a flux-operator ResourceSet's resources, a
// Kyverno rule's generated data, a Crossplane Composition's manifests.
// Aliases are not followed, and what a found object holds is not
// searched again.
func nestedObjects(d *source.Document) []nestedObject {
	obj := d.Object()
	for _, g := range engineReads {
		if strings.HasPrefix(obj.APIVersion, g) {
			return nil
		}
	}
	var out []nestedObject
	var walk func(n *yaml.Node, field string, top bool)
	walk = func(n *yaml.Node, field string, top bool) {
		if len(out) == maxNested {
			return
		}
		switch n.Kind {
		case yaml.MappingNode:
			if !top {
				if o, ok := keyholeObject(n); ok {
					o.at, _ = d.Where(source.Lookup(n, "kind"))
					o.field = field
					out = append(out, o)
					return
				}
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], diag.JoinKey(field, n.Content[i].Value), false)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, diag.JoinIndex(field, i), false)
			}
		}
	}
	walk(d.Node, "", true)
	return out
}

// keyholeObject reports whether the mapping n is an object of one of
// keyhole's kinds (not a Secret, which any object may carry for its own
// controller), and which.
func keyholeObject(n *yaml.Node) (nestedObject, bool) {
	apiVersion, kind := source.StringField(n, "apiVersion"), source.StringField(n, "kind")
	if apiVersion == "" || kind == "" {
		return nestedObject{}, false
	}
	k, ok := schema.Lookup(apiVersion, kind)
	if !ok || k == schema.KindSecret {
		if k, ok = schema.LookupAgentSandbox(apiVersion, kind); !ok {
			return nestedObject{}, false
		}
	}
	return nestedObject{kind: string(k), name: source.StringField(source.Lookup(n, "metadata"), "name")}, true
}

// nested says, of each of keyhole's objects written inside it, that the
// object of another kind it holds is not checked.
func (p *pass) nested(it *item, ns []nestedObject) {
	obj := it.obj()
	wrapper := obj.APIVersion + " " + obj.Kind + " " + it.ref().String()
	for _, n := range ns {
		what := n.kind
		if n.name != "" {
			what += " " + n.name
		}
		p.diags = append(p.diags, p.diagnostic(codeKindNested, it, n.at, n.field,
			fmt.Sprintf("%s holds a %s at %s: its controller makes it in the cluster, and keyhole does not read what a %s makes, so the %s is not checked", wrapper, what, n.field, obj.Kind, n.kind)))
	}
}
