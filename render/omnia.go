package render

import (
	"cmp"
	"fmt"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
)

// Targets: what a render produces. The kubernetes target renders each
// sandbox into the proxy config, env maps and plain manifests; the omnia
// target emits the omnia.altairalabs.ai resources for clusters that run
// the operator, which renders the sandboxes itself.
const (
	TargetKubernetes = "kubernetes"
	TargetOmnia      = "omnia"
)

// Renderer renders a Plan for one target. Diagnostics are the target's
// own findings, printed like the compiler's; when they hold an error the
// files are nil and nothing must be written.
type Renderer func(p compiler.Plan, opts Options) ([]File, diag.List, error)

// targets maps each target name to its renderer.
func targets() map[string]Renderer {
	return map[string]Renderer{
		TargetKubernetes: func(p compiler.Plan, opts Options) ([]File, diag.List, error) {
			files, err := Render(p, opts)
			return files, nil, err
		},
		TargetOmnia: RenderOmnia,
	}
}

// Targets lists the target names, sorted, for usage messages.
func Targets() []string {
	names := make([]string, 0, 2)
	for n := range targets() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ForTarget returns the renderer of a target; an unknown name is an
// ErrInvalidOptions error listing the valid ones.
func ForTarget(name string) (Renderer, error) {
	r, ok := targets()[name]
	if !ok {
		return nil, fmt.Errorf("%w: target %q (want one of: %s)", ErrInvalidOptions, name, strings.Join(Targets(), ", "))
	}
	return r, nil
}

// OmniaDir is the directory, inside the output, that holds the omnia
// target's objects: omnia/<namespace>/<kind>-<name>.yaml.
const OmniaDir = "omnia"

// Codes of the omnia target's render-time diagnostics.
const (
	codeOmniaRuleDropped         = "OmniaRuleDropped"
	codeOmniaReadOnlyUnexpressed = "OmniaReadOnlyUnexpressible"
	codeOmniaBasicUsernameMiss   = "OmniaBasicUsernameMissing"
	codeOmniaClassRoleMissing    = "OmniaClassRoleMissing"
	codeOmniaNameTaken           = "OmniaNameTaken"
	codeOmniaRuntimeMissing      = "OmniaAgentRuntimeMissing"
	codeOmniaRuntimeBound        = "OmniaAgentRuntimeBound"
	codeOmniaSandboxUnsupported  = "OmniaSandboxUnsupported"
)

// OmniaRules describes the omnia target's diagnostic codes, for docs and
// SARIF. They are render-time findings, not rows of the compiler's check
// table: they concern only what the operator's resources can express.
func OmniaRules() []diag.Rule {
	return []diag.Rule{
		{Code: codeOmniaRuleDropped, Severity: diag.Warning,
			Purpose: "A catalog read-only rule uses path patterns or a body condition, which an omnia Connection cannot express; it is left out and the operator's proxy refuses what it allowed.",
			Help:    "Keep the default kubernetes target for what the rule allowed (git clone over HTTPS, Git LFS downloads)."},
		{Code: codeOmniaReadOnlyUnexpressed, Severity: diag.Error,
			Purpose: "None of a connector's read-only rules can be expressed, and a Connection entry without rules would let every request through.",
			Help:    "Give the connector a rule of methods and path prefixes in keyhole.yaml's catalog, or keep the kubernetes target."},
		{Code: codeOmniaBasicUsernameMiss, Severity: diag.Warning,
			Purpose: "A connector host takes basic auth but the labelled Connection has no basic entry for it to take the user name key from; the host is left out.",
			Help:    "Add a basic entry for the host to the labelled Connection."},
		{Code: codeOmniaClassRoleMissing, Severity: diag.Error,
			Purpose: "The input's SandboxClass named after an agent's sandbox provider does not declare the role an agent connector binds.",
			Help:    "Add the connector's name as a role to the SandboxClass's spec.connections."},
		{Code: codeOmniaNameTaken, Severity: diag.Error,
			Purpose: "An object the omnia target compiles from an agent has the name of an input object or of another compiled object.",
			Help:    "Rename the agent, or the object in the way."},
		{Code: codeOmniaRuntimeMissing, Severity: diag.Error,
			Purpose: "An agent.yaml agent with a sandbox has no AgentRuntime of its name in its namespace in the input. The operator runs an agent from its AgentRuntime, whose required `promptPackRef` and `facades` keyhole cannot invent, so the agent's sandbox bindings have nowhere to go.",
			Help:    "Add the agent's AgentRuntime (same name, same namespace, without spec.sandbox) to the repository; the omnia target fills in its spec.sandbox."},
		{Code: codeOmniaRuntimeBound, Severity: diag.Error,
			Purpose: "The AgentRuntime an agent.yaml agent composes with already has a spec.sandbox; the agent's bindings would replace it.",
			Help:    "Bind the sandbox in one place: remove spec.sandbox from the AgentRuntime, or the sandbox connectors from agent.yaml."},
		{Code: codeOmniaSandboxUnsupported, Severity: diag.Error,
			Purpose: "The declared operator version has no sandbox feature, so it cannot take a Connection, a SandboxClass or an agent's sandbox bindings.",
			Help:    "Declare an operator version that serves the sandbox feature, or keep the default kubernetes target, whose own egress proxy needs no operator."},
	}
}

func omniaSeverity(code string) diag.Severity {
	for _, r := range OmniaRules() {
		if r.Code == code {
			return r.Severity
		}
	}
	return diag.Error
}

// isOmniaKind reports whether the omnia target emits objects of kind.
func isOmniaKind(kind string) bool {
	switch kind {
	case "Connection", "SandboxClass", "AgentRuntime", "ToolRegistry":
		return true
	}
	return false
}

// dnsSubdomain is a Kubernetes object name, which the file name embeds.
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// omniaObject is one object the omnia target writes.
type omniaObject struct {
	kind, namespace, name string
	o                     obj
	// src says where the object comes from, for diagnostics.
	src diag.Object
	pos diag.Pos
	// compiled is true for an object compiled from an agent rather than
	// read from the input.
	compiled bool
}

func (o omniaObject) path() string {
	return path.Join(OmniaDir, o.namespace, strings.ToLower(o.kind)+"-"+o.name+".yaml")
}

// omniaKustomizationHeader heads the omnia target's kustomization.yaml.
const omniaKustomizationHeader = `# Rendered by keyhole render --target omnia: the omnia.altairalabs.ai
# resources, for a cluster whose operator runs the sandboxes.
# AgentRuntime and ToolRegistry are the operator's kinds, served by its own
# CRDs; Connection and SandboxClass by keyhole's (keyhole schema --crds).
# Secrets are never rendered: they hold values. The cluster gets each
# Secret a Connection names from its SealedSecret, ExternalSecret or kubectl.
`

// RenderOmnia renders p as omnia.altairalabs.ai resources: the input's
// Connection, SandboxClass, AgentRuntime and ToolRegistry objects,
// normalized, plus what each agent.yaml agent with a sandbox compiles
// into (a SandboxClass per provider, a Connection per sandbox connector,
// an AgentRuntime per agent). No Secret is emitted. The diagnostics say
// what the operator's resources cannot express; when they hold an error
// no files are returned.
func RenderOmnia(p compiler.Plan, opts Options) ([]File, diag.List, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	if len(p.Objects) == 0 && len(p.Agents) == 0 {
		return nil, nil, fmt.Errorf("%w: the input has no omnia object and no agent with a sandbox", ErrEmpty)
	}
	op := p.Operator
	if op.Version == "" {
		op = schema.DefaultOperator() // a Plan built without one
	}
	r := omniaRender{opts: opts, op: op, taken: map[string]diag.Object{}, classes: map[string]*omniaObject{}}
	for _, o := range p.Objects {
		if err := r.input(o); err != nil {
			return nil, nil, err
		}
	}
	for _, a := range p.Agents {
		if err := r.agent(a); err != nil {
			return nil, nil, err
		}
	}
	r.diags.Sort()
	if r.diags.HasErrors() {
		return nil, r.diags, nil
	}
	var files []File
	var resources []string
	for _, o := range r.objs {
		data, err := encodeObject(o.o)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s/%s: %w", o.kind, o.namespace, o.name, err)
		}
		files = append(files, File{Path: o.path(), Data: data})
		resources = append(resources, o.path())
	}
	slices.Sort(resources)
	k, err := encodeYAML(obj{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  resources,
	})
	if err != nil {
		return nil, nil, err
	}
	files = append(files, File{Path: "kustomization.yaml", Data: append([]byte(omniaKustomizationHeader), k...)})
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return files, r.diags, nil
}

// omniaRender is the state of one omnia render.
type omniaRender struct {
	opts Options
	// op is the operator the input was checked for.
	op    schema.Operator
	objs  []*omniaObject
	diags diag.List
	// taken maps each written path to the object that took it.
	taken map[string]diag.Object
	// classes maps namespace/name to each SandboxClass, input or compiled.
	classes map[string]*omniaObject
}

func (r *omniaRender) report(code string, src diag.Object, pos diag.Pos, format string, args ...any) {
	r.diags = append(r.diags, diag.Diagnostic{Code: code, Severity: omniaSeverity(code), Pos: pos, Object: src, Message: fmt.Sprintf(format, args...)})
}

// add records an object, reporting a name already taken. ok is false
// when it was.
func (r *omniaRender) add(o *omniaObject) (bool, error) {
	if !dnsSubdomain.MatchString(o.name) || len(o.name) > 253 {
		return false, fmt.Errorf("%w: %s %q is not a valid object name", ErrInvalidPlan, o.kind, o.name)
	}
	if !dnsLabel.MatchString(o.namespace) || len(o.namespace) > 63 {
		return false, fmt.Errorf("%w: %s %s: namespace %q is not a DNS label", ErrInvalidPlan, o.kind, o.name, o.namespace)
	}
	p := o.path()
	if prev, ok := r.taken[p]; ok {
		r.report(codeOmniaNameTaken, o.src, o.pos, "%s %s/%s would be written for %s, but %s already has that name",
			o.kind, o.namespace, o.name, o.src, prev)
		return false, nil
	}
	r.taken[p] = o.src
	r.objs = append(r.objs, o)
	if o.kind == "SandboxClass" {
		r.classes[o.namespace+"/"+o.name] = o
	}
	return true, nil
}

// input normalizes one input object: apiVersion, kind, the reduced
// metadata and the spec, which the schema has already closed where
// keyhole owns it; the operator's open spec fields are carried unchanged.
// status is the operator's to write and is dropped.
func (r *omniaRender) input(in compiler.Object) error {
	if !isOmniaKind(in.Source.Kind) || in.Node == nil {
		return nil
	}
	if !r.op.Sandbox && (in.Source.Kind == "Connection" || in.Source.Kind == "SandboxClass") {
		r.report(codeOmniaSandboxUnsupported, in.Source, in.Pos,
			"%s has no sandbox feature and serves no %s; keep the default kubernetes target for it, whose egress proxy needs no operator, or declare an operator version that serves the sandbox feature",
			r.op, in.Source.Kind)
		return nil
	}
	var raw map[string]any
	if err := in.Node.Decode(&raw); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidPlan, in.Source, err)
	}
	var spec any
	if n := mapValue(in.Node, "spec"); n != nil {
		var err error
		if spec, err = plainValue(n); err != nil {
			return fmt.Errorf("%w: %s: spec: %w", ErrInvalidPlan, in.Source, err)
		}
	}
	ns := cmp.Or(in.Source.Namespace, r.opts.DefaultNamespace)
	md := obj{"name": in.Source.Name, "namespace": ns}
	meta, _ := raw["metadata"].(map[string]any)
	if labels := stringMap(meta["labels"], nil); len(labels) > 0 {
		md["labels"] = labels
	}
	if ann := stringMap(meta["annotations"], droppedAnnotation); len(ann) > 0 {
		md["annotations"] = ann
	}
	o := obj{"apiVersion": schema.Group, "kind": in.Source.Kind, "metadata": md}
	if spec != nil {
		o["spec"] = spec
	}
	_, err := r.add(&omniaObject{kind: in.Source.Kind, namespace: ns, name: in.Source.Name, o: o, src: in.Source, pos: in.Pos})
	return err
}

// mapValue returns the value of key in mapping n, or nil.
func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// droppedAnnotation reports the annotations the omnia target leaves out:
// keyhole's own suppression list, which means nothing to the operator,
// and the KRM orchestrator's bookkeeping, which kustomize re-assigns.
func droppedAnnotation(k string) bool {
	return k == compiler.IgnoreAnnotation ||
		strings.HasPrefix(k, "config.kubernetes.io/") ||
		strings.HasPrefix(k, "internal.config.kubernetes.io/")
}

// stringMap returns v's string entries as an obj, minus those drop says.
func stringMap(v any, drop func(string) bool) obj {
	m, _ := v.(map[string]any)
	out := obj{}
	for k, val := range m {
		s, ok := val.(string)
		if ok && (drop == nil || !drop(k)) {
			out[k] = s
		}
	}
	return out
}

// maxDepth bounds the nesting plainValue follows, and maxNodes the nodes
// it visits, counting each alias expansion: YAML aliases let a few lines
// stand for millions of nodes, which an operator's spec never needs.
const (
	maxDepth = 100
	maxNodes = 100_000
)

// plainValue converts a YAML node into the values emitYAML writes: maps
// with string keys, sequences, strings, booleans, and numbers or nulls as
// rawScalar in YAML's canonical spelling, so that an operator's open spec
// field is carried with its type unchanged. A timestamp is carried as
// the string it is written as, which is what the API server stores. The
// caller has decoded n with yaml.v3 first, which refuses alias bombs.
func plainValue(n *yaml.Node) (any, error) {
	var w walker
	return w.plainAt(n, 0)
}

// walker counts the nodes one plainValue call visits.
type walker struct{ nodes int }

func (w *walker) plainAt(n *yaml.Node, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxDepth)
	}
	if w.nodes++; w.nodes > maxNodes {
		return nil, fmt.Errorf("more than %d values (aliases expanded)", maxNodes)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("a document of %d nodes", len(n.Content))
		}
		return w.plainAt(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, fmt.Errorf("an alias to nothing")
		}
		return w.plainAt(n.Alias, depth+1)
	case yaml.MappingNode:
		out := make(obj, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return nil, fmt.Errorf("line %d: only string map keys are carried (merge keys and other keys are not)", k.Line)
			}
			v, err := w.plainAt(n.Content[i+1], depth+1)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k.Value, err)
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.SequenceNode:
		out := make(list, len(n.Content))
		for i, c := range n.Content {
			v, err := w.plainAt(c, depth+1)
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
			out[i] = v
		}
		return out, nil
	case yaml.ScalarNode:
		return plainScalar(n)
	}
	return nil, fmt.Errorf("line %d: a YAML node of kind %d cannot be carried", n.Line, n.Kind)
}

// plainScalar converts one scalar by its resolved tag.
func plainScalar(n *yaml.Node) (any, error) {
	var err error
	switch n.ShortTag() {
	case "!!null":
		return rawScalar("null"), nil
	case "!!bool":
		var b bool
		if err = n.Decode(&b); err == nil {
			return b, nil
		}
	case "!!int":
		var v any
		if err = n.Decode(&v); err == nil {
			switch v := v.(type) {
			case int:
				return rawScalar(strconv.Itoa(v)), nil
			case int64:
				return rawScalar(strconv.FormatInt(v, 10)), nil
			case uint64:
				return rawScalar(strconv.FormatUint(v, 10)), nil
			case float64:
				return rawScalar(floatScalar(v)), nil
			}
			err = fmt.Errorf("an integer read as %T", v)
		}
	case "!!float":
		var f float64
		if err = n.Decode(&f); err == nil {
			return rawScalar(floatScalar(f)), nil
		}
	default:
		// Strings, timestamps, binary and custom tags: the text as written.
		return n.Value, nil
	}
	return nil, fmt.Errorf("line %d: %w", n.Line, err)
}

// floatScalar spells f as YAML reads back a float: special values in
// YAML's words, and a fraction or exponent always present so that 1.0
// does not come back as the integer 1.
func floatScalar(f float64) string {
	switch {
	case math.IsNaN(f):
		return ".nan"
	case math.IsInf(f, 1):
		return ".inf"
	case math.IsInf(f, -1):
		return "-.inf"
	}
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// agent compiles one agent.yaml agent into a SandboxClass (unless the
// input has it) and a Connection per sandbox connector, and binds them in
// spec.sandbox of the agent's own AgentRuntime from the input: the
// operator's fields of an AgentRuntime (its PromptPack, its facades) are
// the user's, and an AgentRuntime without them is one the operator
// refuses.
func (r *omniaRender) agent(a compiler.Agent) error {
	ns := cmp.Or(a.Namespace, r.opts.DefaultNamespace)
	if !r.op.Sandbox {
		r.report(codeOmniaSandboxUnsupported, a.Source, a.Pos,
			"agent %s gives its sandbox connectors, but %s has no sandbox feature to run them with; keep the default kubernetes target for this agent, or declare an operator version that serves the sandbox feature",
			a.Name, r.op)
		return nil
	}
	runtime := r.runtime(a, ns)
	if runtime == nil {
		return nil
	}
	class := r.classes[ns+"/"+a.Sandbox]
	if class == nil {
		spec := obj{}
		if a.Image != "" {
			spec["image"] = a.Image
		}
		class = &omniaObject{kind: "SandboxClass", namespace: ns, name: a.Sandbox, src: a.Source, pos: a.Pos, compiled: true,
			o: obj{"apiVersion": schema.Group, "kind": "SandboxClass", "metadata": obj{"name": a.Sandbox, "namespace": ns}, "spec": spec}}
		if _, err := r.add(class); err != nil {
			return err
		}
	}
	var bindings list
	for _, c := range a.Connectors {
		name := a.Name + "-" + c.Name
		conn, ok := r.connection(a, c, ns, name)
		if !ok {
			continue
		}
		added, err := r.add(conn)
		if err != nil {
			return err
		}
		if !added {
			continue
		}
		if !r.declareRole(class, c.Name, a) {
			continue
		}
		bindings = append(bindings, obj{"sandbox": a.Sandbox, "role": c.Name, "connection": name})
	}
	sandbox := obj{"enabled": true}
	if len(bindings) > 0 {
		sandbox["connections"] = bindings
	}
	spec, _ := runtime.o["spec"].(obj)
	if spec == nil {
		spec = obj{}
		runtime.o["spec"] = spec
	}
	spec["sandbox"] = sandbox
	return nil
}

// runtime returns the input's AgentRuntime that agent a composes with:
// the one of its name in its namespace. It reports, and returns nil,
// when there is none or it binds its sandbox itself.
func (r *omniaRender) runtime(a compiler.Agent, ns string) *omniaObject {
	for _, o := range r.objs {
		if o.kind != "AgentRuntime" || o.namespace != ns || o.name != a.Name || o.compiled {
			continue
		}
		if spec, _ := o.o["spec"].(obj); spec != nil && spec["sandbox"] != nil {
			r.report(codeOmniaRuntimeBound, a.Source, a.Pos,
				"agent %s would bind its sandbox connectors in spec.sandbox of AgentRuntime %s/%s (%s), which binds its sandbox itself; bind in one place: remove spec.sandbox from the AgentRuntime, or sandbox: true from the agent's connectors",
				a.Name, ns, a.Name, o.src)
			return nil
		}
		return o
	}
	r.report(codeOmniaRuntimeMissing, a.Source, a.Pos,
		"agent %s has a sandbox, but the input has no AgentRuntime %s/%s to bind it in: the operator runs an agent from its AgentRuntime, whose promptPackRef and facades keyhole cannot invent; add that AgentRuntime (without spec.sandbox) to the repository, and the omnia target fills in its spec.sandbox from agent.yaml",
		a.Name, ns, a.Name)
	return nil
}

// declareRole makes sure class declares role: a compiled class gains it,
// an input class that lacks it is an error, since the input is the
// user's and the operator would refuse the binding.
func (r *omniaRender) declareRole(class *omniaObject, role string, a compiler.Agent) bool {
	spec, _ := class.o["spec"].(obj)
	if spec == nil {
		spec = obj{}
		class.o["spec"] = spec
	}
	roles, _ := spec["connections"].(list)
	var names []string
	for _, x := range roles {
		if m, ok := x.(obj); ok {
			if s, ok := m["role"].(string); ok {
				names = append(names, s)
			}
		}
	}
	if slices.Contains(names, role) {
		return true
	}
	if !class.compiled {
		r.report(codeOmniaClassRoleMissing, a.Source, a.Pos,
			"agent %s binds connector %s as role %q of SandboxClass %s/%s, which the input declares without that role (it has: %s); add {role: %s} to its spec.connections",
			a.Name, role, role, class.namespace, class.name, cmp.Or(strings.Join(names, ", "), "none"), role)
		return false
	}
	roles = append(roles, obj{"role": role})
	slices.SortFunc(roles, func(x, y any) int {
		return strings.Compare(x.(obj)["role"].(string), y.(obj)["role"].(string))
	})
	spec["connections"] = roles
	return true
}

// connection compiles one sandbox connector into a Connection named
// name: the catalog's hosts, the labelled Connection's Secret, one inject
// entry per way the catalog presents the credential, and the catalog's
// read-only rules an omnia Connection can express. ok is false when the
// connector cannot be kept read-only, which is reported.
func (r *omniaRender) connection(a compiler.Agent, c compiler.AgentConnector, ns, name string) (*omniaObject, bool) {
	rules, ok := r.rules(a, c)
	if !ok {
		return nil, false
	}
	var hosts []string
	type headerKey struct{ name, prefix string }
	headers := map[headerKey][]string{}
	var headerOrder []headerKey
	var basics list
	for _, h := range c.Connector.Hosts {
		hosts = append(hosts, h.Host)
		switch in := h.Inject; {
		case in.Header != nil:
			// A host that takes either gets the header: the operator
			// injects one way per host, and the API is what it serves.
			k := headerKey{in.Header.Name, in.Header.ValuePrefix}
			if _, seen := headers[k]; !seen {
				headerOrder = append(headerOrder, k)
			}
			headers[k] = append(headers[k], h.Host)
		case in.Basic != nil:
			user, ok := c.UsernameKeys[h.Host]
			if !ok {
				r.report(codeOmniaBasicUsernameMiss, a.Source, a.Pos,
					"connector %s sends basic auth to %s, but Connection %s has no basic entry for that host to take the user name key from; %s is left out of Connection %s/%s, and the operator's proxy will not inject there",
					c.Name, h.Host, c.Connection, h.Host, ns, name)
				continue
			}
			basics = append(basics, obj{"hosts": []string{h.Host}, "basic": obj{"usernameKey": user, "passwordKey": c.Key}, "rules": rules})
		}
	}
	var inject list
	for i, k := range headerOrder {
		e := obj{"hosts": headers[k], "header": k.name, "value": k.prefix + "{{ ." + c.Key + " }}", "rules": rules}
		// One placeholder variable per Connection: the first entry sets it.
		if i == 0 {
			e["placeholderEnv"] = []string{c.Connector.Env}
		}
		inject = append(inject, e)
	}
	inject = append(inject, basics...)
	secretRef := obj{"name": c.SecretName}
	if c.SecretNamespace != "" {
		secretRef["namespace"] = c.SecretNamespace
	}
	spec := obj{
		"hosts":      hosts,
		"credential": obj{"kind": "secret", "secretRef": secretRef},
		"placement":  obj{},
	}
	if len(inject) > 0 {
		spec["placement"] = obj{"inject": inject}
	}
	return &omniaObject{kind: "Connection", namespace: ns, name: name, src: a.Source, pos: a.Pos,
		o: obj{"apiVersion": schema.Group, "kind": "Connection", "metadata": obj{"name": name, "namespace": ns}, "spec": spec}}, true
}

// rules returns the catalog's read-only rules an omnia Connection can
// express: methods on path prefixes. A rule with a body condition is left
// out whole, since dropping the condition would widen it; a rule's path
// patterns are left out and its prefixes kept, which only narrows it.
// Each loss is a warning saying what the operator will refuse. ok is
// false when nothing is left, since a Connection entry without rules
// allows every request.
func (r *omniaRender) rules(a compiler.Agent, c compiler.AgentConnector) (list, bool) {
	var out list
	for _, rule := range c.Connector.ReadOnly {
		lost := len(rule.Body) > 0 || len(rule.PathPatterns) > 0
		if lost {
			r.report(codeOmniaRuleDropped, a.Source, a.Pos,
				"connector %s's read-only rule %s cannot be expressed by an omnia Connection (methods and path prefixes only) and is left out of Connection %s-%s: %s",
				c.Name, describeRule(rule), a.Name, c.Name, refusedBy(rule))
		}
		if len(rule.Body) > 0 || len(rule.PathPrefixes) == 0 {
			continue
		}
		out = append(out, obj{"methods": slices.Clone(rule.Methods), "pathPrefixes": slices.Clone(rule.PathPrefixes)})
	}
	if len(out) == 0 {
		r.report(codeOmniaReadOnlyUnexpressed, a.Source, a.Pos,
			"no read-only rule of connector %s can be expressed by an omnia Connection, and one without rules would allow every request, writes included; give the connector a rule of methods and path prefixes in keyhole.yaml's catalog, or keep the default kubernetes target",
			c.Name)
		return nil, false
	}
	return out, true
}

// describeRule names a catalog rule in a message.
func describeRule(rule schema.Rule) string {
	s := strings.Join(rule.Methods, ",")
	if paths := slices.Concat(rule.PathPrefixes, rule.PathPatterns); len(paths) > 0 {
		s += " " + strings.Join(paths, " ")
	}
	if len(rule.Body) > 0 {
		keys := make([]string, 0, len(rule.Body))
		for k := range rule.Body {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var conds []string
		for _, k := range keys {
			conds = append(conds, k+" in ["+strings.Join(rule.Body[k], ",")+"]")
		}
		s += " with body " + strings.Join(conds, ", ")
	}
	return s
}

// refusedBy says what the operator's proxy refuses once rule is gone.
func refusedBy(rule schema.Rule) string {
	joined := strings.Join(rule.PathPatterns, " ")
	switch {
	case strings.Contains(joined, "/info/lfs/"):
		return "Git LFS downloads (git lfs pull) will be refused by the operator's proxy; keep the default kubernetes target for Git LFS"
	case strings.Contains(joined, "git-upload-pack"):
		return "git clone and fetch over HTTPS will be refused by the operator's proxy; keep the default kubernetes target for git"
	}
	return "the requests it allowed will be refused by the operator's proxy; keep the default kubernetes target for them"
}
