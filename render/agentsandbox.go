package render

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
)

// TargetAgentSandbox renders for clusters that run kubernetes-sigs/
// agent-sandbox: each sandbox's proxy, config, CA and trust objects as
// the kubernetes target renders them, with the sandbox pod written into
// the repository's own SandboxTemplate of the sandbox's name.
const TargetAgentSandbox = "agent-sandbox"

// Codes of the agent-sandbox target's render-time diagnostics.
const (
	codeASTemplateUnsafe    = "AgentSandboxTemplateUnsafe"
	codeASTemplateConflict  = "AgentSandboxTemplateConflict"
	codeASNetworkUnmanaged  = "AgentSandboxNetworkUnmanaged"
	codeASClaimEnv          = "AgentSandboxClaimEnv"
	codeASTemplateDuplicate = "AgentSandboxTemplateDuplicate"
	codeASTemplateUnbound   = "AgentSandboxTemplateUnbound"
)

// AgentSandboxRules describes the agent-sandbox target's diagnostic
// codes, for docs and SARIF. They concern only what a SandboxTemplate
// can carry, so they are render-time findings, not rows of the
// compiler's check table.
func AgentSandboxRules() []diag.Rule {
	return []diag.Rule{
		{Code: codeASTemplateUnsafe, Severity: diag.Error,
			Purpose: fmt.Sprintf("The SandboxTemplate's pod could step around the egress proxy or reach what only the proxy may: it shares the node's network, PID or IPC namespace, or its own process namespace; a container is privileged, adds NET_ADMIN, NET_RAW, SETUID, SETGID, SYS_ADMIN or ALL, allows privilege escalation, runs as the proxy's UID %d or mounts one of the proxy's volumes (its CA key, its config, the Secrets it injects); or the pod mounts its ServiceAccount token into every container or names a ServiceAccount of its own, where keyhole's trust publisher needs one whose token only it mounts.", proxyUID),
			Help:    "Remove the setting named in the message from the template's pod; the sandbox needs none of them to reach its allowed hosts."},
		{Code: codeASTemplateConflict, Severity: diag.Error,
			Purpose: "The SandboxTemplate already has something of the name keyhole adds: a container or init container (egress-transparent-init, egress-trust-publish, egress-proxy), a volume or volume claim template, an environment variable of the rendered environment (a placeholder, a proxy or CA variable), or a mount at " + TrustDir + ".",
			Help:    "Rename or remove it in the template; keyhole sets the variable itself (docs/render.md lists them)."},
		{Code: codeASNetworkUnmanaged, Severity: diag.Warning,
			Purpose: "The SandboxTemplate's networkPolicyManagement is Unmanaged: the agent-sandbox controller writes no NetworkPolicy for it, so keyhole's egress rules (DNS, and TCP 443 and 6443 for the proxy and the trust publisher, and the ports of `--upstream-proxy` and `--otlp-endpoint` when given) are not applied either. The transparent-mode rules inside the pod still hold the sandbox to its proxy.",
			Help:    "Let the NetworkPolicy (or Cilium policy) that manages these pods allow the ports the message names, or set networkPolicyManagement to Managed."},
		{Code: codeASClaimEnv, Severity: diag.Warning,
			Purpose: "The SandboxTemplate's envVarsInjectionPolicy lets SandboxClaims set environment variables, and the controller lets a claim name any container of the pod: a claim could set, say, SSL_CERT_FILE in the egress proxy's container and change which upstreams it trusts. Under Overrides a claim can also replace the rendered proxy and CA variables of the sandbox (the transparent-mode rules still hold it).",
			Help:    "Keep envVarsInjectionPolicy Disallowed unless whoever creates SandboxClaims is trusted as much as whoever writes the template."},
		{Code: codeASTemplateUnbound, Severity: diag.Info,
			Purpose: "A SandboxTemplate of the input has the name of no sandbox of the plan (`<AgentRuntime or ToolRegistry>-<SandboxClass>`, or `<agent>-<sandbox>`), nor that name as a kustomize namePrefix or nameSuffix renames the two objects and the template alike, so it is carried as written, without an egress proxy: its sandboxes reach the network as the template lets them.",
			Help:    "Nothing to fix for a template that needs no credential; otherwise rename it after the sandbox whose Connections it should get (the message names the sandboxes of its namespace)."},
		{Code: codeASTemplateDuplicate, Severity: diag.Error,
			Purpose: "Two objects of the agent-sandbox target would be written to one file: the same SandboxTemplate read twice in one deploy unit (for example in two kustomize units rendered together), or a carried object whose name collides with a rendered one.",
			Help:    "Keep one definition of the object per deploy unit."},
	}
}

func asSeverity(code string) diag.Severity { return diag.SeverityOf(AgentSandboxRules(), code) }

// asKustomizationHeader heads the agent-sandbox target's kustomization.
const asKustomizationHeader = `# Rendered by keyhole render --target agent-sandbox: per sandbox the
# egress proxy's config, CA and trust objects, and the SandboxTemplate
# whose pods run the proxy as a native sidecar, for a cluster that runs
# kubernetes-sigs/agent-sandbox (its CRDs and controller are installed
# separately). Secrets are never rendered: they hold values.
`

// asObject is an agent-sandbox object of the input, normalized.
type asObject struct {
	kind      schema.Kind
	namespace string
	name      string
	o         obj
	src       diag.Object
	pos       diag.Pos
}

// RenderAgentSandbox renders p for agent-sandbox. For each sandbox it
// writes what the kubernetes target writes in sidecar mode, except the
// sandbox Deployment and its NetworkPolicy: their pod goes into the
// input's SandboxTemplate named after the sandbox (one is emitted with
// the sandbox's image where the input has none), and their egress rules
// into that template's networkPolicy. The input's other agent-sandbox
// objects are carried, normalized. The diagnostics say what a template
// cannot carry; when they hold an error no files are returned.
func RenderAgentSandbox(p compiler.Plan, opts Options) ([]File, diag.List, error) {
	if opts.ProxyMode == ModeDeployment {
		return nil, nil, fmt.Errorf("%w: the %s target runs the proxy as a native sidecar of each sandbox's pod (proxy mode %s), not as a Deployment", ErrInvalidOptions, TargetAgentSandbox, ModeSidecar)
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, nil, err
	}
	r := asRender{opts: opts, templates: map[string]*asObject{}}
	for _, o := range p.Objects {
		if err := r.input(o); err != nil {
			return nil, nil, err
		}
	}
	base, err := Render(p, opts)
	if err != nil {
		return nil, nil, err
	}
	byPath := map[string][]byte{}
	for _, f := range base {
		byPath[f.Path] = f.Data
	}
	var files []File
	var resources []string
	taken := map[string]diag.Object{}
	write := func(p string, data []byte, src diag.Object, pos diag.Pos) {
		if prev, ok := taken[p]; ok {
			r.report(codeASTemplateDuplicate, src, pos, "%s would be written to %s, which %s already takes", src, p, prev)
			return
		}
		taken[p] = src
		files = append(files, File{Path: p, Data: data})
		if strings.HasSuffix(p, ".yaml") {
			resources = append(resources, p)
		}
	}
	bound := map[*asObject]bool{}
	templateOf := r.bind(p.Sandboxes)
	for i, sb := range p.Sandboxes {
		sb.Namespace = cmp.Or(sb.Namespace, opts.DefaultNamespace)
		dir := path.Join(sb.Namespace, sb.Name)
		n := sandboxInput{sb: sb, opts: opts}.names()
		deployment := dir + "/deployment-" + n.sandbox + ".yaml"
		policy := dir + "/networkpolicy-" + n.sandbox + ".yaml"
		tmpl := templateOf[i]
		o, err := r.template(sb, tmpl, byPath[deployment], byPath[policy], byPath[dir+"/proxy.json"])
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox %s: %w", describe(sb), err)
		}
		src := diag.Object{APIVersion: schema.AgentSandboxExtensionsAPIVersion, Kind: string(schema.KindSandboxTemplate), Namespace: sb.Namespace, Name: sb.Name}
		pos := sb.Pos
		if tmpl != nil {
			bound[tmpl] = true
			src, pos = tmpl.src, tmpl.pos
		}
		trust := dir + "/configmap-" + n.trust + ".yaml"
		for _, f := range base {
			if path.Dir(f.Path) != dir || f.Path == deployment || f.Path == policy {
				continue
			}
			data := f.Data
			if f.Path == trust {
				if data, err = trustNote(data, sb.Name, n); err != nil {
					return nil, nil, fmt.Errorf("sandbox %s: %w", describe(sb), err)
				}
			}
			write(f.Path, data, src, pos)
		}
		if o == nil {
			continue // a diagnostic says why
		}
		data, err := encodeObject(o)
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox %s: SandboxTemplate: %w", describe(sb), err)
		}
		write(dir+"/sandboxtemplate-"+sb.Name+".yaml", data, src, pos)
	}
	for _, o := range r.objs {
		if bound[o] {
			continue
		}
		if o.kind == schema.KindSandboxTemplate {
			var names []string
			for _, sb := range p.Sandboxes {
				if cmp.Or(sb.Namespace, opts.DefaultNamespace) == o.namespace {
					names = append(names, sb.Name)
				}
			}
			slices.Sort(names)
			used := ""
			if refs := r.referrers(o); len(refs) > 0 {
				used = "; " + strings.Join(refs, " and ") + " start sandboxes from it"
			}
			r.report(codeASTemplateUnbound, o.src, o.pos, "SandboxTemplate %s/%s is no sandbox's, so it is carried without an egress proxy (the sandboxes of namespace %s: %s)%s",
				o.namespace, o.name, o.namespace, cmp.Or(strings.Join(names, ", "), "none"), used)
		}
		data, err := encodeObject(o.o)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s/%s: %w", o.kind, o.namespace, o.name, err)
		}
		write(path.Join(o.namespace, strings.ToLower(string(o.kind))+"-"+o.name+".yaml"), data, o.src, o.pos)
	}
	r.diags.Sort()
	if r.diags.HasErrors() {
		return nil, r.diags, nil
	}
	files, err = withKustomization(files, asKustomizationHeader, resources)
	if err != nil {
		return nil, nil, err
	}
	return files, r.diags, nil
}

// asRender is the state of one agent-sandbox render.
type asRender struct {
	opts  Options
	objs  []*asObject
	diags diag.List
	// templates maps namespace/name to each input SandboxTemplate.
	templates map[string]*asObject
}

func (r *asRender) report(code string, src diag.Object, pos diag.Pos, format string, args ...any) {
	r.diags = append(r.diags, diag.Diagnostic{Code: code, Severity: asSeverity(code), Pos: pos, Object: src, Message: fmt.Sprintf(format, args...)})
}

// input normalizes one input object of agent-sandbox's kinds:
// apiVersion, kind, the reduced metadata and the spec as written, which
// the check has validated against agent-sandbox's CRD. status is the
// controller's to write and is dropped.
func (r *asRender) input(in compiler.Object) error {
	kind, ok := schema.LookupAgentSandbox(in.Source.APIVersion, in.Source.Kind)
	if !ok {
		return nil
	}
	node, err := in.Tree()
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidPlan, in.Source, err)
	}
	if node == nil {
		return nil
	}
	raw, spec, err := decodeInput(in, node)
	if err != nil {
		return err
	}
	ns := cmp.Or(in.Source.Namespace, r.opts.DefaultNamespace)
	if !dnsLabel.MatchString(ns) || len(ns) > 63 || !dnsSubdomain.MatchString(in.Source.Name) || len(in.Source.Name) > 253 {
		return fmt.Errorf("%w: %s: not a valid namespace and name", ErrInvalidPlan, in.Source)
	}
	o := carried(in, schema.AgentSandboxAPIVersion(kind), string(kind), ns, raw, spec)
	a := &asObject{kind: kind, namespace: ns, name: in.Source.Name, o: o, src: in.Source, pos: in.Pos}
	r.objs = append(r.objs, a)
	if kind == schema.KindSandboxTemplate {
		key := ns + "/" + a.name
		if _, ok := r.templates[key]; !ok {
			r.templates[key] = a
		}
	}
	return nil
}

// bind finds the input SandboxTemplate of each sandbox, by index: the
// one of the sandbox's name in its namespace, else the one whose name is
// the sandbox's as a kustomize namePrefix or nameSuffix renames the two
// objects the sandbox is named after. An overlay that prefixes every
// name with "prod-" turns AgentRuntime coder and SandboxClass workspace
// into prod-coder and prod-workspace, so the sandbox is
// prod-coder-prod-workspace, while the template coder-workspace, which
// the overlay's SandboxWarmPool still names, becomes prod-coder-workspace.
// Carried without its proxy, that template would start warm sandboxes
// that reach the network as they like. A template two sandboxes could
// claim so is bound to neither.
func (r *asRender) bind(sandboxes []compiler.Sandbox) []*asObject {
	out := make([]*asObject, len(sandboxes))
	exact := map[*asObject]bool{}
	for i, sb := range sandboxes {
		if t := r.templates[cmp.Or(sb.Namespace, r.opts.DefaultNamespace)+"/"+sb.Name]; t != nil {
			out[i] = t
			exact[t] = true
		}
	}
	claims := map[*asObject][]int{}
	for i, sb := range sandboxes {
		if out[i] != nil {
			continue
		}
		ns := cmp.Or(sb.Namespace, r.opts.DefaultNamespace)
		for _, t := range r.objs {
			if t.kind == schema.KindSandboxTemplate && !exact[t] && t.namespace == ns &&
				r.templates[t.namespace+"/"+t.name] == t && affixed(sb.Source.Name, sb.Class, t.name) {
				claims[t] = append(claims[t], i)
			}
		}
	}
	for t, idx := range claims {
		if len(idx) == 1 {
			out[idx[0]] = t
		}
	}
	// A sandbox two templates could be has none of them.
	seen := map[int]int{}
	for _, idx := range claims {
		if len(idx) == 1 {
			seen[idx[0]]++
		}
	}
	for i, n := range seen {
		if n > 1 {
			out[i] = nil
		}
	}
	return out
}

// affixed reports whether name is runtime-class as written before one
// prefix and one suffix were added to every name: runtime is p+r+s,
// class is p+c+s and name is p+r+"-"+c+s, with p or s not empty.
func affixed(runtime, class, name string) bool {
	for i := 0; i <= len(runtime) && i <= len(class) && i <= len(name); i++ {
		if i > 0 && (runtime[i-1] != class[i-1] || runtime[i-1] != name[i-1]) {
			break
		}
		for j := 0; i+j <= len(runtime) && i+j <= len(class) && i+j <= len(name); j++ {
			if j > 0 {
				a, b, c := runtime[len(runtime)-j], class[len(class)-j], name[len(name)-j]
				if a != b || a != c {
					break
				}
			}
			if i+j == 0 {
				continue
			}
			r, c := runtime[i:len(runtime)-j], class[i:len(class)-j]
			if r != "" && c != "" && name == runtime[:i]+r+"-"+c+runtime[len(runtime)-j:] {
				return true
			}
		}
	}
	return false
}

// referrers names the SandboxWarmPools and SandboxClaims of the input
// that start sandboxes from the template t.
func (r *asRender) referrers(t *asObject) []string {
	var out []string
	for _, o := range r.objs {
		if (o.kind == schema.KindSandboxWarmPool || o.kind == schema.KindSandboxClaim) && o.namespace == t.namespace {
			if ref, _ := at(o.o, "spec", "sandboxTemplateRef")["name"].(string); ref == t.name {
				out = append(out, string(o.kind)+" "+o.namespace+"/"+o.name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// decodeRendered reads back one object the kubernetes target rendered,
// as the values the emitter writes.
func decodeRendered(data []byte) (obj, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return nil, err
	}
	v, err := plainValue(&n)
	if err != nil {
		return nil, err
	}
	o, ok := v.(obj)
	if !ok {
		return nil, fmt.Errorf("not a mapping")
	}
	return o, nil
}

// at walks o along keys, returning the mapping there, nil when any step
// is not a mapping.
func at(o obj, keys ...string) obj {
	for _, k := range keys {
		next, ok := o[k].(obj)
		if !ok {
			return nil
		}
		o = next
	}
	return o
}

// ensure returns the mapping o[k], adding an empty one when absent; nil
// when o[k] holds something else.
func ensure(o obj, k string) obj {
	if v, ok := o[k]; ok {
		m, _ := v.(obj)
		return m
	}
	m := obj{}
	o[k] = m
	return m
}

// items returns o[k] as a list, nil when it is none.
func items(o obj, k string) list {
	l, _ := o[k].(list)
	return l
}

// named returns the "name" of each mapping of l.
func named(l list) []string {
	var out []string
	for _, v := range l {
		if m, ok := v.(obj); ok {
			if s, ok := m["name"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// isTrue reports whether v is the boolean true.
func isTrue(v any) bool { b, ok := v.(bool); return ok && b }

// template returns the SandboxTemplate of sb: tmpl's with keyhole's pod
// parts merged in, or, when tmpl is nil, one whose only container is the
// sandbox's. deployment and policy are the kubernetes target's rendered
// sandbox Deployment and NetworkPolicy, whose pod and egress rules are
// what is merged. nil with diagnostics when tmpl cannot carry them.
func (r *asRender) template(sb compiler.Sandbox, tmpl *asObject, deployment, policy, proxyJSON []byte) (obj, error) {
	dep, err := decodeRendered(deployment)
	if err != nil {
		return nil, fmt.Errorf("%w: reading back the sandbox Deployment: %w", ErrInvalidPlan, err)
	}
	np, err := decodeRendered(policy)
	if err != nil {
		return nil, fmt.Errorf("%w: reading back the sandbox NetworkPolicy: %w", ErrInvalidPlan, err)
	}
	kpod := at(dep, "spec", "template", "spec")
	kmeta := at(dep, "spec", "template", "metadata")
	kcontainers := items(kpod, "containers")
	if kpod == nil || kmeta == nil || len(kcontainers) != 1 {
		return nil, fmt.Errorf("%w: the rendered sandbox Deployment has no pod of one container", ErrInvalidPlan)
	}
	ksandbox := kcontainers[0].(obj)
	// The sidecar pod of the kubernetes target carries no config hash (a
	// rule change reloads its proxy in place); a template does, so the
	// controller recreates its warm pool's unclaimed pods with the new
	// config, while a claimed sandbox keeps its pod and its proxy reloads.
	sum := sha256.Sum256(proxyJSON)
	kann, _ := kmeta["annotations"].(obj)
	if kann == nil {
		kann = obj{}
		kmeta["annotations"] = kann
	}
	kann[configHashAnnotation] = hex.EncodeToString(sum[:])
	if tmpl == nil {
		labels, _ := at(dep, "metadata")["labels"].(obj)
		return obj{
			"apiVersion": schema.AgentSandboxExtensionsAPIVersion,
			"kind":       string(schema.KindSandboxTemplate),
			"metadata":   obj{"name": sb.Name, "namespace": sb.Namespace, "labels": labels},
			"spec": obj{
				"networkPolicy": asPolicy(nil, np),
				"podTemplate": obj{
					"metadata": kmeta,
					"spec":     kpod,
				},
			},
		}, nil
	}
	o := tmpl.o
	bad := len(r.diags)
	unsafe := func(field, format string, args ...any) {
		r.report(codeASTemplateUnsafe, tmpl.src, tmpl.pos, "%s: "+format, append([]any{field}, args...)...)
	}
	conflict := func(field, format string, args ...any) {
		r.report(codeASTemplateConflict, tmpl.src, tmpl.pos, "%s: "+format, append([]any{field}, args...)...)
	}
	spec := at(o, "spec")
	pt := at(spec, "podTemplate")
	pod := at(pt, "spec")
	if pod == nil {
		return nil, fmt.Errorf("%w: %s has no spec.podTemplate.spec", ErrInvalidPlan, tmpl.src)
	}
	const podPath = "spec.podTemplate.spec"
	for _, f := range [...]string{"hostNetwork", "hostPID", "hostIPC", "shareProcessNamespace"} {
		if isTrue(pod[f]) {
			unsafe(podPath+"."+f, "the pod shares a namespace the sandbox could use to step around its proxy or read the proxy's files")
		}
	}
	if isTrue(pod["automountServiceAccountToken"]) {
		unsafe(podPath+".automountServiceAccountToken", "every container would get the token that may rewrite the trust bundle; only egress-trust-publish mounts it")
	}
	if sa, ok := pod["serviceAccountName"].(string); ok && sa != "" {
		unsafe(podPath+".serviceAccountName", "the pod runs as %s, whose token only the trust publisher mounts; a ServiceAccount of the template's own is not supported", kpod["serviceAccountName"])
	}
	if sa, ok := pod["serviceAccount"].(string); ok && sa != "" {
		unsafe(podPath+".serviceAccount", "the pod runs as %s, whose token only the trust publisher mounts; a ServiceAccount of the template's own is not supported", kpod["serviceAccountName"])
	}
	psc, _ := pod["securityContext"].(obj)
	if runsAsProxy(psc) {
		unsafe(podPath+".securityContext.runAsUser", "%d is the proxy's UID, which the transparent-mode rules leave unredirected", proxyUID)
	}
	kinits := items(kpod, "initContainers")
	users := slices.Concat(items(pod, "initContainers"), items(pod, "containers"))
	for _, name := range named(users) {
		if slices.Contains(named(kinits), name) {
			conflict(podPath, "a container is named %s, as one keyhole adds", name)
		}
	}
	for _, name := range named(items(pod, "volumes")) {
		if slices.Contains(named(items(kpod, "volumes")), name) {
			conflict(podPath+".volumes", "a volume is named %s, as one keyhole adds", name)
		}
	}
	// The controller adds a volume per volume claim template, of its name.
	for _, v := range items(spec, "volumeClaimTemplates") {
		m, _ := v.(obj)
		if name, _ := at(m, "metadata")["name"].(string); slices.Contains(named(items(kpod, "volumes")), name) {
			conflict("spec.volumeClaimTemplates", "a volume claim template is named %s, as a volume keyhole adds", name)
		}
	}
	kenv := items(ksandbox, "env")
	kenvNames := named(kenv)
	kmounts := items(ksandbox, "volumeMounts")
	for _, list := range [...]string{"initContainers", "containers"} {
		for i, c := range items(pod, list) {
			c, ok := c.(obj)
			if !ok {
				continue
			}
			cp := fmt.Sprintf("%s.%s[%d]", podPath, list, i)
			for _, name := range named(items(c, "env")) {
				if slices.Contains(kenvNames, name) {
					conflict(cp+".env", "%s is set by keyhole (a placeholder, proxy or CA variable)", name)
				}
			}
			for _, m := range items(c, "volumeMounts") {
				mm, _ := m.(obj)
				if mm["mountPath"] == TrustDir {
					conflict(cp+".volumeMounts", "something is mounted at %s, where keyhole mounts the trust bundle", TrustDir)
				}
				// A mount of a volume only keyhole adds would put the
				// proxy's CA key, config or Secrets in the sandbox.
				if name, _ := mm["name"].(string); slices.Contains(named(items(kpod, "volumes")), name) {
					unsafe(cp+".volumeMounts", "it mounts %s, a volume of keyhole's egress proxy, which no sandbox container may see", name)
				}
			}
			sc, _ := c["securityContext"].(obj)
			if isTrue(sc["privileged"]) {
				unsafe(cp+".securityContext.privileged", "a privileged container could rewrite the pod's nat rules")
			}
			if isTrue(sc["allowPrivilegeEscalation"]) {
				unsafe(cp+".securityContext.allowPrivilegeEscalation", "a setuid program could regain the capabilities the sandbox drops")
			}
			if runsAsProxy(sc) {
				unsafe(cp+".securityContext.runAsUser", "%d is the proxy's UID, which the transparent-mode rules leave unredirected", proxyUID)
			}
			caps, _ := sc["capabilities"].(obj)
			for _, a := range items(caps, "add") {
				s, _ := a.(string)
				switch strings.TrimPrefix(strings.ToUpper(s), "CAP_") {
				case "NET_ADMIN", "NET_RAW", "SETUID", "SETGID", "SYS_ADMIN", "ALL":
					unsafe(cp+".securityContext.capabilities.add", "%s would let the sandbox step around its proxy", s)
				}
			}
		}
	}
	if hasErrorSince(r.diags, bad) {
		return nil, nil
	}
	switch spec["envVarsInjectionPolicy"] {
	case "Allowed", "Overrides":
		r.report(codeASClaimEnv, tmpl.src, tmpl.pos, "spec.envVarsInjectionPolicy: %s lets a SandboxClaim set environment variables in any container of the pod, keyhole's egress-proxy included", spec["envVarsInjectionPolicy"])
	}

	// The pod: keyhole's init containers first (the nat rules before
	// anything runs, then the trust bundle, then the proxy as a native
	// sidecar), then the template's; each of the template's containers
	// gets the sandbox's environment, trust mount and dropped
	// capabilities; the volumes of both.
	pod["initContainers"] = slices.Concat(kinits, items(pod, "initContainers"))
	ksc := ksandbox["securityContext"].(obj)
	for _, list := range [...]string{"initContainers", "containers"} {
		for i, c := range items(pod, list) {
			c, ok := c.(obj)
			if name, _ := c["name"].(string); !ok || slices.Contains(named(kinits), name) {
				continue
			}
			sc, caps := ensure(c, "securityContext"), obj(nil)
			if sc != nil {
				caps = ensure(sc, "capabilities")
			}
			if caps == nil {
				return nil, fmt.Errorf("%w: %s: %s.%s[%d].securityContext is not a mapping", ErrInvalidPlan, tmpl.src, podPath, list, i)
			}
			c["env"] = slices.Concat(items(c, "env"), kenv)
			c["volumeMounts"] = slices.Concat(items(c, "volumeMounts"), kmounts)
			if _, ok := sc["allowPrivilegeEscalation"]; !ok {
				sc["allowPrivilegeEscalation"] = false
			}
			if _, ok := sc["seccompProfile"]; !ok {
				sc["seccompProfile"] = ksc["seccompProfile"]
			}
			drop := items(caps, "drop")
			for _, d := range items(at(ksc, "capabilities"), "drop") {
				if !slices.Contains(drop, d) && !slices.Contains(drop, any("ALL")) {
					drop = append(drop, d)
				}
			}
			caps["drop"] = drop
		}
	}
	pod["volumes"] = slices.Concat(items(pod, "volumes"), items(kpod, "volumes"))
	pod["automountServiceAccountToken"] = false
	pod["serviceAccountName"] = kpod["serviceAccountName"]
	sc := ensure(pod, "securityContext")
	md := ensure(pt, "metadata")
	var ann obj
	if md != nil {
		ann = ensure(md, "annotations")
	}
	if sc == nil || ann == nil {
		return nil, fmt.Errorf("%w: %s: %s.securityContext or spec.podTemplate.metadata.annotations is not a mapping", ErrInvalidPlan, tmpl.src, podPath)
	}
	for k, v := range kpod["securityContext"].(obj) {
		if _, ok := sc[k]; !ok {
			sc[k] = v
		}
	}
	for k, v := range kmeta["annotations"].(obj) {
		ann[k] = v
	}

	// The shared NetworkPolicy the controller writes from the template:
	// keyhole's egress rules added to the template's, or to the
	// controller's default ingress where the template has none.
	switch spec["networkPolicyManagement"] {
	case "Unmanaged":
		r.report(codeASNetworkUnmanaged, tmpl.src, tmpl.pos, "spec.networkPolicyManagement: Unmanaged: the controller writes no NetworkPolicy, so keyhole's egress rules (%s) must come from whatever manages these pods' policy", egressPortsText(np))
	default:
		user, _ := spec["networkPolicy"].(obj)
		spec["networkPolicy"] = asPolicy(user, np)
	}
	return o, nil
}

// trustNote rewrites the note on <sandbox>-egress-trust that says who
// writes bundle.pem: here the pods of the SandboxTemplate, not a
// Deployment of keyhole's.
func trustNote(data []byte, template string, n names) ([]byte, error) {
	cm, err := decodeRendered(data)
	if err != nil {
		return nil, fmt.Errorf("%w: reading back ConfigMap %s: %w", ErrInvalidPlan, n.trust, err)
	}
	ann := at(cm, "metadata", "annotations")
	if ann == nil {
		return nil, fmt.Errorf("%w: ConfigMap %s has no annotations", ErrInvalidPlan, n.trust)
	}
	ann["keyhole.dev/bundle"] = "bundle.pem is written in the cluster by the init container egress-trust-publish of every pod of SandboxTemplate " + template +
		" (field manager " + trustFieldManager + "): the system roots plus the public ca.crt of " + n.ca
	return encodeObject(cm)
}

func hasErrorSince(ds diag.List, from int) bool {
	for _, d := range ds[from:] {
		if d.Severity == diag.Error {
			return true
		}
	}
	return false
}

// runsAsProxy reports whether a securityContext runs as the proxy's UID.
func runsAsProxy(sc obj) bool {
	switch v := sc["runAsUser"].(type) {
	case rawScalar:
		return string(v) == fmt.Sprint(proxyUID)
	case int:
		return v == proxyUID
	}
	return false
}

// asPolicy is a template's networkPolicy with the egress rules of the
// kubernetes target's sidecar NetworkPolicy (np) added to the user's:
// DNS, and TCP 443 and 6443 for the proxy's upstreams and the trust
// publisher's API server. Rules of a NetworkPolicy add up, so the user's
// stay as written; a rule of keyhole's the user's already hold is not
// repeated. Where the template has none, the ingress is the
// controller's own default (from the sandbox router only), which a
// networkPolicy of keyhole's would otherwise replace.
// egressPortsText names the ports np's egress rules admit, for a
// message: "DNS, TCP 443 and 6443", with the ports of a forward proxy
// and a collector (Options.UpstreamProxy, Options.OTLPEndpoint) too when
// the render has them.
func egressPortsText(np obj) string {
	var tcp []string
	dns := false
	for _, rule := range items(at(np, "spec"), "egress") {
		r, _ := rule.(obj)
		for _, p := range items(r, "ports") {
			po, _ := p.(obj)
			port := fmt.Sprint(po["port"])
			switch {
			case port == "53":
				dns = true
			case po["protocol"] == "TCP" && !slices.Contains(tcp, port):
				tcp = append(tcp, port)
			}
		}
	}
	var parts []string
	if dns {
		parts = append(parts, "DNS")
	}
	if n := len(tcp); n > 0 {
		ports := tcp[n-1]
		if n > 1 {
			ports = strings.Join(tcp[:n-1], ", ") + " and " + ports
		}
		parts = append(parts, "TCP "+ports)
	}
	return strings.Join(parts, ", ")
}

func asPolicy(user obj, np obj) obj {
	egress := items(at(np, "spec"), "egress")
	if user == nil {
		return obj{
			"ingress": list{obj{"from": list{obj{
				"namespaceSelector": obj{"matchLabels": obj{"kubernetes.io/metadata.name": "agent-sandbox-system"}},
				"podSelector":       obj{"matchLabels": obj{"app": "sandbox-router"}},
			}}}},
			"egress": egress,
		}
	}
	out := items(user, "egress")
	for _, rule := range egress {
		if !slices.ContainsFunc(out, func(r any) bool { return reflect.DeepEqual(r, rule) }) {
			out = append(out, rule)
		}
	}
	user["egress"] = out
	return user
}
