package compiler

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/source"
)

// A ClusterExternalSecret's namespace selectors pick namespaces by their
// labels. Where the input holds the Namespace object, keyhole evaluates
// them as the external-secrets controller does (docs/inputs.md): the
// namespaces spec.namespaces lists, and those each selector picks, are
// OR'ed; within one selector, matchLabels and matchExpressions are AND'ed;
// an empty selector picks every namespace; a selector the controller
// cannot convert makes it fail, and it then makes no ExternalSecret at all.

// nameLabel is the label the API server sets on every Namespace, to its
// name.
const nameLabel = "kubernetes.io/metadata.name"

// standIns is what a deploy unit's Secret stand-ins declare beyond the
// Secrets indexed by reference: the Secrets its ClusterExternalSecrets
// make where their selectors pick, the Namespace objects those selectors
// are evaluated against, and why a Secret the input names is not created.
type standIns struct {
	// selected holds, by Secret name and in input order, each
	// ClusterExternalSecret that makes the Secret in the namespaces its
	// selectors pick.
	selected map[string][]*selection
	// namespaces holds the unit's Namespace objects by name, the first
	// of each name.
	namespaces map[string]*namespaceObject
	// notCreated holds, for a Secret something in the input names but does
	// not create, why, for ConnectionSecretMissing; a ref with no
	// namespace stands for any namespace.
	notCreated map[ref][]string
}

// selection is a ClusterExternalSecret's Secret in the namespaces its
// selectors pick.
type selection struct {
	s         *secret
	ces       string // "ClusterExternalSecret <name>"
	selectors []labelSelector
	// picked holds the Secret as read from each namespace, whose
	// messages say how keyhole took it to be there.
	picked map[string]*secret
}

// namespaceObject is a Namespace object of the input; its labels are
// read from its tree the first time a selector is evaluated against it.
type namespaceObject struct {
	doc    *source.Document
	labels map[string]string
	read   bool
	ok     bool // the labels could be read
}

// labelSelectorWire is a Kubernetes LabelSelector.
type labelSelectorWire struct {
	MatchLabels      map[string]string `yaml:"matchLabels"`
	MatchExpressions []struct {
		Key      string   `yaml:"key"`
		Operator string   `yaml:"operator"`
		Values   []string `yaml:"values"`
	} `yaml:"matchExpressions"`
}

// labelSelector is a LabelSelector converted as the controller converts
// it: every requirement must hold; none means every namespace, nothing
// means none (a null entry of spec.namespaceSelectors).
type labelSelector struct {
	reqs    []requirement
	nothing bool
}

type requirement struct {
	key    string
	op     string // In, NotIn, Exists or DoesNotExist; matchLabels are In
	values []string
}

func (s labelSelector) matches(labels map[string]string) bool {
	if s.nothing {
		return false
	}
	for _, r := range s.reqs {
		v, has := labels[r.key]
		var ok bool
		switch r.op {
		case "In":
			ok = has && slices.Contains(r.values, v)
		case "NotIn":
			ok = !has || !slices.Contains(r.values, v)
		case "Exists":
			ok = has
		case "DoesNotExist":
			ok = !has
		}
		if !ok {
			return false
		}
	}
	return true
}

// selectorProblem is where a selector is one the controller refuses, and
// why.
type selectorProblem struct {
	at  path
	key bool
	msg string
}

// convertSelector converts w, found at at, as the controller's
// LabelSelectorAsSelector does, or says where and why it refuses it.
func convertSelector(w *labelSelectorWire, at path) (labelSelector, *selectorProblem) {
	if w == nil {
		return labelSelector{nothing: true}, nil
	}
	in := func(elems ...any) path { return append(slices.Clone(at), elems...) }
	var s labelSelector
	for _, k := range slices.Sorted(maps.Keys(w.MatchLabels)) {
		v := w.MatchLabels[k]
		if err := checkLabelKey(k); err != nil {
			return s, &selectorProblem{at: in("matchLabels", k), key: true, msg: err.Error()}
		}
		if err := checkLabelValue(v); err != nil {
			return s, &selectorProblem{at: in("matchLabels", k), msg: err.Error()}
		}
		s.reqs = append(s.reqs, requirement{key: k, op: "In", values: []string{v}})
	}
	for i, e := range w.MatchExpressions {
		switch e.Operator {
		case "In", "NotIn":
			if len(e.Values) == 0 {
				return s, &selectorProblem{at: in("matchExpressions", i, "values"), msg: fmt.Sprintf("operator %s needs at least one value", e.Operator)}
			}
		case "Exists", "DoesNotExist":
			if len(e.Values) > 0 {
				return s, &selectorProblem{at: in("matchExpressions", i, "values"), msg: fmt.Sprintf("operator %s takes no values", e.Operator)}
			}
		default:
			return s, &selectorProblem{at: in("matchExpressions", i, "operator"), msg: fmt.Sprintf("%q is not a label selector operator (In, NotIn, Exists, DoesNotExist)", e.Operator)}
		}
		if err := checkLabelKey(e.Key); err != nil {
			return s, &selectorProblem{at: in("matchExpressions", i, "key"), msg: err.Error()}
		}
		for j, v := range e.Values {
			if err := checkLabelValue(v); err != nil {
				return s, &selectorProblem{at: in("matchExpressions", i, "values", j), msg: err.Error()}
			}
		}
		s.reqs = append(s.reqs, requirement{key: e.Key, op: e.Operator, values: e.Values})
	}
	return s, nil
}

// labelName is the name part of a label key, and a label value when not
// empty (Kubernetes' qualified name).
var labelName = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)

// checkLabelKey holds a label key to the API server's rule: an optional
// DNS subdomain prefix and a slash, then a name of at most 63 letters,
// digits, '-', '_' and '.', starting and ending with a letter or digit.
func checkLabelKey(k string) error {
	name := k
	if prefix, rest, ok := strings.Cut(k, "/"); ok {
		if prefix == "" || config.CheckSecretName(prefix) != nil {
			return fmt.Errorf("label key %q: its prefix is not a DNS subdomain", k)
		}
		name = rest
	}
	if len(name) > 63 || !labelName.MatchString(name) {
		return fmt.Errorf("label key %q is not a qualified name (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit, after an optional DNS subdomain and '/')", k)
	}
	return nil
}

// checkLabelValue holds a label value to the API server's rule: empty, or
// at most 63 letters, digits, '-', '_' and '.', starting and ending with a
// letter or digit.
func checkLabelValue(v string) error {
	if v != "" && (len(v) > 63 || !labelName.MatchString(v)) {
		return fmt.Errorf("label value %q is not valid (at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)", v)
	}
	return nil
}

// addNamespace keeps a Namespace object for the selectors evaluated
// against it; the first of a name in the unit counts.
func (p *pass) addNamespace(it *item) {
	name := it.obj().Name
	if name == "" {
		return
	}
	if p.stand.namespaces == nil {
		p.stand.namespaces = map[string]*namespaceObject{}
	}
	if _, ok := p.stand.namespaces[name]; !ok {
		p.stand.namespaces[name] = &namespaceObject{doc: it.doc}
	}
}

// namespaceLabels returns the labels of namespace ns as the input
// describes it, with the name label the API server adds: from the
// Connection's own unit, else the first other unit (in order of name)
// that holds a Namespace object of that name. ok is false when none does.
func (p *pass) namespaceLabels(ns string) (labels map[string]string, ok bool) {
	for _, o := range append([]*pass{p}, p.units...) {
		n := o.stand.namespaces[ns]
		if n == nil {
			continue
		}
		if !n.read {
			n.read = true
			var w struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
			}
			if t, err := n.doc.Tree(); err == nil && t.Decode(&w) == nil {
				n.ok = true
				n.labels = map[string]string{nameLabel: ns}
				for k, v := range w.Metadata.Labels {
					if k != nameLabel {
						n.labels[k] = v
					}
				}
			}
		}
		if n.ok {
			return n.labels, true
		}
	}
	return nil, false
}

// selectedSecret returns the Secret r that a ClusterExternalSecret's
// selector makes in r's namespace, nil when none does: evaluated against
// the namespace's Namespace object where the input holds one, else taken
// to pick it, as the labels live in the cluster (docs/inputs.md).
func (p *pass) selectedSecret(r ref) *secret {
	labels, described := p.namespaceLabels(r.namespace)
	for _, o := range p.units {
		for _, sel := range o.stand.selected[r.name] {
			if described && !slices.ContainsFunc(sel.selectors, func(s labelSelector) bool { return s.matches(labels) }) {
				continue
			}
			if s := sel.picked[r.namespace]; s != nil {
				return s
			}
			s := *sel.s
			if described {
				s.edit().from = fmt.Sprintf("%s, whose selector picks namespace %s by the labels of its Namespace object", sel.ces, r.namespace)
			} else {
				s.edit().from = fmt.Sprintf("%s, taken to pick namespace %s, which no Namespace object in the input describes", sel.ces, r.namespace)
			}
			if sel.picked == nil {
				sel.picked = map[string]*secret{}
			}
			sel.picked[r.namespace] = &s
			// Its findings are the ClusterExternalSecret's, reported
			// when the Secret is read from any namespace.
			sel.s.read = true
			return &s
		}
	}
	return nil
}

// notCreatedNote says why Secret r, which the input names, is not created
// there: an ExternalSecret with creationPolicy None, a selector that does
// not pick r's namespace, or one the controller refuses. "" when nothing
// names it.
func (p *pass) notCreatedNote(r ref) string {
	var notes []string
	add := func(why string) {
		if !slices.Contains(notes, why) {
			notes = append(notes, why)
		}
	}
	for _, o := range p.units {
		for _, why := range o.stand.notCreated[r] {
			add(why)
		}
		for _, why := range o.stand.notCreated[ref{name: r.name}] {
			add(why)
		}
	}
	if labels, ok := p.namespaceLabels(r.namespace); ok {
		// selectedSecret found none: no selector picks the namespace.
		pairs := make([]string, 0, len(labels))
		for _, k := range slices.Sorted(maps.Keys(labels)) {
			pairs = append(pairs, k+"="+labels[k])
		}
		for _, o := range p.units {
			for _, sel := range o.stand.selected[r.name] {
				add(fmt.Sprintf("%s makes it only in the namespaces its selector picks, and Namespace %s (labels: %s) is not one of them",
					sel.ces, r.namespace, strings.Join(pairs, ", ")))
			}
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}

// noteNotCreated records why Secret r is not created (see notCreated).
func (p *pass) noteNotCreated(r ref, why string) {
	if p.stand.notCreated == nil {
		p.stand.notCreated = map[ref][]string{}
	}
	if !slices.Contains(p.stand.notCreated[r], why) {
		p.stand.notCreated[r] = append(p.stand.notCreated[r], why)
	}
}

// selectInNamespaces records that s, the Secret a ClusterExternalSecret
// makes, is also in the namespaces its selectors pick.
func (p *pass) selectInNamespaces(name, ces string, s *secret, selectors []labelSelector) {
	if p.stand.selected == nil {
		p.stand.selected = map[string][]*selection{}
	}
	p.stand.selected[name] = append(p.stand.selected[name], &selection{s: s, ces: ces, selectors: selectors})
}

// cesSelectors converts a ClusterExternalSecret's selectors, the single
// spec.namespaceSelector first, as the controller lists them.
func cesSelectors(single *labelSelectorWire, list []*labelSelectorWire) ([]labelSelector, *selectorProblem) {
	var out []labelSelector
	if single != nil {
		s, bad := convertSelector(single, path{"spec", "namespaceSelector"})
		if bad != nil {
			return nil, bad
		}
		out = append(out, s)
	}
	for i, w := range list {
		s, bad := convertSelector(w, path{"spec", "namespaceSelectors", i})
		if bad != nil {
			return nil, bad
		}
		out = append(out, s)
	}
	return out, nil
}

// cesSecretName is the name of the Secret a ClusterExternalSecret's
// ExternalSecrets make.
func cesSecretName(w clusterExternalSecretWire, esName string) string {
	return cmp.Or(w.Spec.ExternalSecretSpec.Target.Name, esName)
}

// selectionRead reports whether a Connection read the Secret name that a
// ClusterExternalSecret of this unit makes where its selector picks: the
// findings set aside under the name alone (a ref without a namespace) are
// reported then.
func (p *pass) selectionRead(name string) bool {
	return slices.ContainsFunc(p.stand.selected[name], func(sel *selection) bool { return sel.s.read })
}
