package compiler

import (
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

// Secrets without plaintext: a GitOps repository rarely holds a Secret's
// values, but it often says which keys a Secret will have through the
// object that produces it. These are indexed as Secrets whose keys are
// known and whose values are not, so that ConnectionSecretKeyMissing runs
// on them and ConnectionInjectionInvalid says why it cannot.

// Codes of the checks that say what could not be checked, and of a
// kustomize directory that does not build (reported by the loader).
const (
	codeKustomizeBuildFailed = source.CodeKustomizeBuildFailed
	codeKustomizeRemoteBase  = source.CodeKustomizeRemoteBase
	codeValuesUnknown        = "ConnectionValuesUnknown"
	codeKeysUnknown          = "ConnectionKeysUnknown"
)

// The API versions of the Secret stand-ins keyhole reads.
const (
	sealedSecretAPIVersion       = "bitnami.com/v1alpha1"
	externalSecretAPIVersion     = "external-secrets.io/v1"
	externalSecretAPIVersionBeta = "external-secrets.io/v1beta1"
)

// sopsEncrypted is how SOPS writes an encrypted value.
const sopsEncrypted = "ENC["

type sealedSecretWire struct {
	Metadata metadata `yaml:"metadata"`
	Spec     struct {
		EncryptedData map[string]string `yaml:"encryptedData"`
		Template      struct {
			// spec.template.metadata is not read: the Secret takes the
			// SealedSecret's own name and namespace.

			// Data holds keys written in plaintext beside the sealed ones;
			// a value may itself be a template over the sealed keys.
			Data map[string]string `yaml:"data"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type externalSecretWire struct {
	Metadata metadata           `yaml:"metadata"`
	Spec     externalSecretSpec `yaml:"spec"`
}

// clusterExternalSecretWire is a ClusterExternalSecret: the ExternalSecret
// its spec.externalSecretSpec describes, made by the controller in each
// namespace it names or its selectors pick.
type clusterExternalSecretWire struct {
	Metadata metadata `yaml:"metadata"`
	Spec     struct {
		ExternalSecretName string               `yaml:"externalSecretName"`
		ExternalSecretSpec externalSecretSpec   `yaml:"externalSecretSpec"`
		Namespaces         []string             `yaml:"namespaces"`
		NamespaceSelector  *labelSelectorWire   `yaml:"namespaceSelector"`
		NamespaceSelectors []*labelSelectorWire `yaml:"namespaceSelectors"`
	} `yaml:"spec"`
}

type externalSecretSpec struct {
	Target struct {
		Name           string `yaml:"name"`
		CreationPolicy string `yaml:"creationPolicy"`
		// Manifest, when set, is the kind of object made instead of
		// a Secret.
		Manifest *struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		} `yaml:"manifest"`
		Template *struct {
			MergePolicy  string            `yaml:"mergePolicy"`
			Data         map[string]string `yaml:"data"`
			TemplateFrom []struct {
				// Target is where the template's result goes: Data
				// (the default), Annotations or Labels.
				Target string `yaml:"target"`
			} `yaml:"templateFrom"`
		} `yaml:"template"`
	} `yaml:"target"`
	Data []struct {
		SecretKey string `yaml:"secretKey"`
	} `yaml:"data"`
	DataFrom []yaml.Node `yaml:"dataFrom"`
}

// addSecretSource indexes a SealedSecret, an ExternalSecret or a
// SOPS-encrypted Secret, and reports whether the document was one. It runs
// before the schema lookup: the first two have no keyhole schema (their
// CRDs are not keyhole's), and a SOPS Secret's top-level sops field and
// ENC[...] values would fail the Secret schema that plain Secrets must
// pass.
func (p *pass) addSecretSource(v *schema.Validator, it *item) bool {
	o := it.obj()
	switch {
	case o.APIVersion == sealedSecretAPIVersion && o.Kind == "SealedSecret":
		p.count(it.doc)
		var w sealedSecretWire
		if p.decode(it.doc, it, &w) {
			p.addSealedSecret(it, w)
		}
	case (o.APIVersion == externalSecretAPIVersion || o.APIVersion == externalSecretAPIVersionBeta) && o.Kind == "ExternalSecret":
		p.count(it.doc)
		var w externalSecretWire
		if p.decode(it.doc, it, &w) {
			p.addExternalSecret(it, path{"spec"}, w.Spec, it.obj().Name, []string{it.ns}, "ExternalSecret "+it.ref().String())
		}
	case (o.APIVersion == externalSecretAPIVersion || o.APIVersion == externalSecretAPIVersionBeta) && o.Kind == "ClusterExternalSecret":
		p.count(it.doc)
		var w clusterExternalSecretWire
		if p.decode(it.doc, it, &w) {
			p.addClusterExternalSecret(it, w)
		}
	case o.APIVersion == "v1" && o.Kind == "Namespace":
		// Not a Secret stand-in, and not a kind keyhole checks: kept for
		// the ClusterExternalSecret selectors evaluated against it.
		p.addNamespace(it)
		return false
	case o.APIVersion == "v1" && o.Kind == "Secret" && source.Lookup(it.doc.Node, "sops") != nil:
		p.count(it.doc)
		p.addSOPSSecret(v, it)
	default:
		return false
	}
	return true
}

func (p *pass) addSealedSecret(it *item, w sealedSecretWire) {
	for _, k := range slices.Sorted(maps.Keys(w.Spec.EncryptedData)) {
		p.checkKey(it, path{"spec", "encryptedData", k}, true, k)
	}
	for _, k := range slices.Sorted(maps.Keys(w.Spec.Template.Data)) {
		p.checkKey(it, path{"spec", "template", "data", k}, true, k)
	}
	s := &secret{item: *it, values: nil, declared: &secretDeclared{from: "SealedSecret " + it.ref().String()}}
	for k := range w.Spec.EncryptedData {
		s.values.set(k, secretValue{})
	}
	for k, val := range w.Spec.Template.Data {
		if _, sealed := s.values.get(k); sealed || strings.Contains(val, "{{") {
			s.values.set(k, secretValue{}) // the controller renders it from sealed keys
			continue
		}
		s.values.set(k, plainValue([]byte(val)))
	}
	// The controller names the Secret after the SealedSecret, whatever
	// spec.template.metadata says (kubeseal copies the names it sealed for
	// there, and kustomize renames only the SealedSecret's own).
	p.indexSecret(it.ref(), s)
}

// addClusterExternalSecret indexes the Secret a ClusterExternalSecret's
// ExternalSecrets make: in each namespace spec.namespaces lists, and in
// those its selectors pick (see selectedSecret), evaluated once the unit's
// Namespace objects are all known. A selector the controller refuses makes
// it fail as a whole: it makes no ExternalSecret anywhere.
func (p *pass) addClusterExternalSecret(it *item, w clusterExternalSecretWire) {
	esName := cmp.Or(w.Spec.ExternalSecretName, it.obj().Name)
	from := "ClusterExternalSecret " + it.obj().Name
	name := cesSecretName(w, esName)
	namespaces := slices.Compact(slices.Sorted(slices.Values(w.Spec.Namespaces)))
	namespaces = slices.DeleteFunc(namespaces, func(ns string) bool { return ns == "" })
	selectors, bad := cesSelectors(w.Spec.NamespaceSelector, w.Spec.NamespaceSelectors)
	if bad != nil {
		// Found by a walk, the finding waits, as a Secret's own do, for a
		// Connection to read the Secret (deferSecret); the note on that
		// Connection's ConnectionSecretMissing says why.
		p.report(codeSchemaInvalid, it, bad.at, bad.key, "the external-secrets controller refuses this selector, and then makes no ExternalSecret at all: %s", bad.msg)
		why := fmt.Sprintf("%s would make it, but the external-secrets controller refuses its selector (%s: %s), and then makes it nowhere", from, bad.at, bad.msg)
		for _, ns := range namespaces {
			p.noteNotCreated(ref{namespace: ns, name: name}, why)
		}
		p.noteNotCreated(ref{name: name}, why)
		p.lastSecret, p.lastSecretDoc = ref{name: name}, it.doc
		return
	}
	s := p.addExternalSecret(it, path{"spec", "externalSecretSpec"}, w.Spec.ExternalSecretSpec, esName, namespaces, from)
	if len(selectors) == 0 {
		return
	}
	if s != nil {
		p.selectInNamespaces(name, from, s, selectors)
	} else if w.Spec.ExternalSecretSpec.Target.CreationPolicy == "None" {
		p.noteNotCreated(ref{name: name}, from+" does not create it (spec.externalSecretSpec.target.creationPolicy: None)")
	}
	if len(namespaces) == 0 {
		// No one namespace's Secret stands for it: its findings wait
		// under its name alone until a Connection reads the Secret
		// from a namespace its selector picks (see settleSecrets).
		p.lastSecret, p.lastSecretDoc = ref{name: name}, it.doc
	}
}

// addExternalSecret indexes the Secret an ExternalSecret of this spec,
// named esName, makes in each of namespaces; at is where the spec is in
// the document, from what the Secret's messages say it comes from. It
// returns the Secret, nil when the spec makes none.
func (p *pass) addExternalSecret(it *item, at path, spec externalSecretSpec, esName string, namespaces []string, from string) *secret {
	in := func(elems ...any) path { return append(slices.Clone(at), elems...) }
	for i, d := range spec.Data {
		p.checkKey(it, in("data", i, "secretKey"), false, d.SecretKey)
	}
	if t := spec.Target.Template; t != nil {
		for _, k := range slices.Sorted(maps.Keys(t.Data)) {
			p.checkKey(it, in("target", "template", "data", k), true, k)
		}
	}
	if n := spec.Target.Name; n != "" {
		p.checkName(it, in("target", "name"), n)
	}
	s := &secret{item: *it, values: nil, declared: &secretDeclared{from: from}}
	// The keys the controller writes (docs/inputs.md): those it fetches
	// (spec.data, spec.dataFrom) unless a template with data or
	// templateFrom replaces them (mergePolicy Replace, the default), then
	// the template's.
	t := spec.Target.Template
	fetched := t == nil || t.MergePolicy == "Merge" || len(t.Data) == 0 && len(t.TemplateFrom) == 0
	for _, d := range spec.Data {
		if d.SecretKey == "" {
			continue
		}
		if fetched {
			s.values.set(d.SecretKey, secretValue{})
		} else if !slices.Contains(s.decl().replaced, d.SecretKey) {
			e := s.edit()
			e.replaced = append(e.replaced, d.SecretKey)
		}
	}
	if len(spec.DataFrom) > 0 {
		if fetched {
			s.keysUnknown, s.edit().unknownWhy = true, "whose spec.dataFrom takes keys only the external store knows"
		} else {
			s.replacedAny = true
		}
	}
	if t != nil {
		for k := range t.Data {
			s.values.set(k, secretValue{})
		}
		for _, tf := range t.TemplateFrom {
			if tf.Target == "" || strings.EqualFold(tf.Target, "Data") {
				s.keysUnknown, s.edit().unknownWhy = true, "whose spec.target.template.templateFrom takes keys from objects outside the input"
			}
		}
	}
	if len(s.decl().replaced) > 0 || s.replacedAny {
		e := s.edit()
		slices.Sort(e.replaced)
		e.replacedBy = from
	}
	switch spec.Target.CreationPolicy {
	case "Merge", "CreateOrMerge":
		s.merges = true
	}
	if m := spec.Target.Manifest; m != nil && (m.APIVersion != "v1" || m.Kind != "Secret") {
		return nil // it makes another kind of object, not a Secret
	}
	name := cmp.Or(spec.Target.Name, esName)
	if spec.Target.CreationPolicy == "None" {
		// The controller fetches the data and writes no Secret: the
		// Secret, if any, comes from elsewhere. Orphan creates it as
		// Owner does, without an owner reference.
		for _, ns := range namespaces {
			p.noteNotCreated(ref{namespace: ns, name: name}, fmt.Sprintf("%s does not create it (%s: None)", from, in("target", "creationPolicy")))
		}
		return nil
	}
	for _, ns := range namespaces {
		// One Secret in each namespace, read by any: its findings are
		// the document's, reported once when any of them is read.
		p.indexSecret(ref{namespace: ns, name: name}, s)
	}
	return s
}

// addSOPSSecret validates a SOPS-encrypted Secret as the Secret it
// decrypts to, without its sops field and with each encrypted value
// standing in as empty, then indexes it: keys are visible, encrypted
// values are not, and values SOPS left in plaintext (unencrypted_regex and
// the like) are checked as a plain Secret's are.
func (p *pass) addSOPSSecret(v *schema.Validator, it *item) {
	doc := it.doc
	shadow := withoutSOPS(doc.Node)
	if vs := v.Validate(schema.KindSecret, shadow); len(vs) > 0 {
		for _, vi := range vs {
			pos, msg := violationAt(doc, vi.Line, vi.Column, vi.Path, vi.Message)
			p.diags = append(p.diags, p.diagnostic(codeSchemaInvalid, it, pos, vi.Path, msg))
		}
		p.indexSecret(it.ref(), &secret{item: *it, values: nil, keysUnknown: true, invalid: true, declared: &secretDeclared{from: "SOPS-encrypted Secret " + it.ref().String()}})
		return
	}
	var w secretWire
	if err := shadow.Decode(&w); err != nil {
		p.report(codeSchemaInvalid, it, nil, false, "cannot read Secret: %s", strings.TrimPrefix(err.Error(), "yaml: "))
		return
	}
	p.checkSecretKeyNames(it, w)
	s := &secret{item: *it, values: secretValues(w)}
	s.declared = &secretDeclared{from: "SOPS-encrypted Secret " + it.ref().String()}
	for _, field := range []string{"data", "stringData"} {
		m := source.Lookup(doc.Node, field)
		if m == nil || m.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			if val := m.Content[i+1]; val.Kind == yaml.ScalarNode && strings.HasPrefix(val.Value, sopsEncrypted) {
				s.values.set(m.Content[i].Value, secretValue{})
			}
		}
	}
	p.indexSecret(it.ref(), s)
}

// withoutSOPS returns a copy of a SOPS Secret's root mapping without its
// sops field, whose data and stringData hold "" in place of each ENC[...]
// value. The copy's nodes keep the original positions.
func withoutSOPS(root *yaml.Node) *yaml.Node {
	out := *root
	out.Content = nil
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, val := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "sops":
			continue
		case "data", "stringData":
			if val.Kind == yaml.MappingNode {
				m := *val
				m.Content = slices.Clone(val.Content)
				for j := 1; j < len(m.Content); j += 2 {
					if e := m.Content[j]; e.Kind == yaml.ScalarNode && strings.HasPrefix(e.Value, sopsEncrypted) {
						blank := *e
						blank.Value, blank.Tag, blank.Style = "", "!!str", 0
						m.Content[j] = &blank
					}
				}
				val = &m
			}
		}
		out.Content = append(out.Content, k, val)
	}
	return &out
}

func checkKeysUnknown(p *pass) {
	for _, c := range p.connList {
		s, r := p.secretOf(c)
		if s == nil || !s.keysUnknown && !s.merges || s.invalid {
			continue
		}
		why := s.decl().unknownWhy
		if !s.keysUnknown {
			why = "whose creationPolicy (Merge or CreateOrMerge) keeps the keys the Secret already has, and nothing in the input creates it"
		}
		named := ""
		if keys := s.keys(); len(keys) > 0 {
			named = "; besides, it names " + strings.Join(keys, ", ")
		}
		p.report(codeKeysUnknown, &c.item, path{"spec", "credential", "secretRef", "name"}, false,
			"%s could not run: Secret %s comes from %s, %s%s; its values are not in the input either",
			codeSecretKeyMissing, r, s.decl().from, why, named)
	}
}

func checkValuesUnknown(p *pass) {
	for _, c := range p.connList {
		s, r := p.secretOf(c)
		if s == nil || s.keysUnknown || s.merges {
			continue // checkKeysUnknown says so
		}
		var unknown []string
		inject := c.w.Spec.Placement.Inject
		for i := range inject {
			for _, u := range keysUsed(&inject[i], i) {
				if v, ok := s.values.get(u.key); ok && !v.known && !slices.Contains(unknown, u.key) {
					unknown = append(unknown, u.key)
				}
			}
		}
		if len(unknown) == 0 {
			continue
		}
		slices.Sort(unknown)
		from := s.decl().from
		if from == "" {
			from = "a Secret whose data cannot be decoded"
		}
		p.report(codeValuesUnknown, &c.item, path{"spec", "credential", "secretRef", "name"}, false,
			"%s could not run: values are not in the input (Secret %s comes from %s; keys read: %s); the keys themselves were checked",
			codeInjectionInvalid, r, from, strings.Join(unknown, ", "))
	}
}

// renamedSecret returns the Secret of r's namespace whose name is r's with
// a prefix or suffix added, as kustomize's namePrefix and nameSuffix add
// them to every object's name but not to references only a CRD knows,
// such as a Connection's secretRef; "" when there is none or several.
// referrer is the name of the object whose reference r is.
func (p *pass) renamedSecret(r ref, referrer string) string {
	return p.renamedName(r.name, referrer, namesIn(p.secrets, r.namespace))
}

// renamedName is renamedName(name, referrer, names) where a kustomization
// may have renamed objects: in a deploy unit a kustomization or engine
// builds, never among loose files, where nothing adds a prefix or suffix.
func (p *pass) renamedName(name, referrer string, names []string) string {
	if p.unit.Source == source.UnitLoose {
		return ""
	}
	return renamedName(name, referrer, names)
}

// unreadNote names the files of the input a walk could not read, or
// skipped because .gitignore ignores them although they name keyhole's
// kinds, which may hold what a message says is not in the input; "" when
// there are none.
func (p *pass) unreadNote() string {
	var note string
	if files := source.Unread(p.opts.Loaded); len(files) > 0 {
		note = fmt.Sprintf("; %s could not be read and may hold it", capList(files))
	}
	if files := source.Ignored(p.opts.Loaded); len(files) > 0 {
		note += fmt.Sprintf("; %s, which .gitignore ignores, may hold it", capList(files))
	}
	return note
}

// generatorHash is the suffix kustomize's generators add to a generated
// Secret's or ConfigMap's name, and to nothing else.
var generatorHash = regexp.MustCompile(`^-[0-9a-z]{10}$`)

// renamedName returns the one of names that is name with a prefix or
// suffix added at a word boundary, "" when there is none or several. A
// namePrefix or nameSuffix renames every object of its build, so the
// referrer, the object whose reference name is, carries the same prefix
// and suffix (a generator's hash aside); where it does not, the reference
// is merely wrong (a Connection github-readonly beside the github one
// named), and no rename is claimed.
func renamedName(name, referrer string, names []string) string {
	var found []string
	for _, n := range names {
		if i := strings.Index(n, name); i >= 0 && n != name {
			pre, suf := n[:i], n[i+len(name):]
			if (pre == "" || strings.HasSuffix(pre, "-")) && (suf == "" || strings.HasPrefix(suf, "-")) &&
				strings.HasPrefix(referrer, pre) && (strings.HasSuffix(referrer, suf) || generatorHash.MatchString(suf)) {
				found = append(found, n)
			}
		}
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// renamedHint explains a reference that a kustomize namePrefix or
// nameSuffix left behind: kustomize renames the references it is
// configured to follow, a Connection's secretRef only with a nameReference
// entry for it, and a nameReference for kind Secret does not follow the
// SealedSecret or ExternalSecret that declares one.
func (p *pass) renamedHint(namespace, renamed string) string {
	hint := fmt.Sprintf("; did you mean %q? A kustomize namePrefix or nameSuffix renamed the Secret but not this reference", renamed)
	if s := p.secrets[ref{namespace: namespace, name: renamed}]; s != nil && s.decl().from != "" && !strings.HasPrefix(s.decl().from, "SOPS") {
		kind, _, _ := strings.Cut(s.decl().from, " ")
		return hint + fmt.Sprintf(", which kustomize does not follow (a nameReference for kind Secret does not cover the %s that declares it)", kind)
	}
	return hint + ", which kustomize follows only with a nameReference entry for kind Secret at Connection's spec/credential/secretRef/name in the kustomization's configurations"
}

// checkKey reports a key of the Secret a stand-in makes that the API
// server would refuse, so the controller could never create it.
func (p *pass) checkKey(it *item, at path, key bool, k string) {
	if err := config.CheckSecretKey(k); err != nil {
		p.report(codeSchemaInvalid, it, at, key, "%s", keyProblem(err))
	}
}

// checkName reports a name a stand-in gives its Secret that the API
// server would refuse.
func (p *pass) checkName(it *item, at path, name string) {
	if err := config.CheckSecretName(name); err != nil {
		p.report(codeSchemaInvalid, it, at, false, "%s", keyProblem(err))
	}
}

// replacedNote says, when key is one an ExternalSecret fetches (or may
// fetch, through spec.dataFrom) but its template drops, why it is not in
// the Secret. When key is a near miss of a key the template makes (near),
// the likely fault is a typo, which mergePolicy Merge would hide: the note
// then says nothing of a key dataFrom may fetch, and does not advise Merge.
func (s *secret) replacedNote(key string, near bool) string {
	d := s.decl()
	if d.replacedBy == "" || !s.replacedAny && !slices.Contains(d.replaced, key) {
		return ""
	}
	if !slices.Contains(d.replaced, key) {
		if near {
			return ""
		}
		return fmt.Sprintf("; %s may fetch it through spec.dataFrom, but its spec.target.template has data (or templateFrom), which replaces the fetched keys (mergePolicy Replace, the default): read a key of the template, or set spec.target.template.mergePolicy: Merge", d.replacedBy)
	}
	if near {
		return fmt.Sprintf("; %s fetches it, but its spec.target.template has data (or templateFrom), which replaces the fetched keys (mergePolicy Replace, the default): read a key of the template", d.replacedBy)
	}
	return fmt.Sprintf("; %s fetches it, but its spec.target.template has data (or templateFrom), which replaces the fetched keys (mergePolicy Replace, the default): read a key of the template, or set spec.target.template.mergePolicy: Merge", d.replacedBy)
}
