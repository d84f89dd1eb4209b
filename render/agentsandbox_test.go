package render

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/fixture"
)

const (
	goldenAgentSandboxDir = "../golden-agent-sandbox"
	sigsExample           = "sigs-agent-sandbox"
)

// validateAgentSandboxFile checks one rendered object: agent-sandbox's
// kinds against its published CRDs, strictly, as keyhole check does; the
// rest against the pinned Kubernetes and cert-manager schemas.
func validateAgentSandboxFile(t *testing.T, v *schema.Validator, k8s *k8sSchemas, f File) {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal(f.Data, &n); err != nil {
		t.Fatalf("%s: %v", f.Path, err)
	}
	var head struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
	}
	if err := n.Decode(&head); err != nil {
		t.Fatalf("%s: %v", f.Path, err)
	}
	if k, ok := schema.LookupAgentSandbox(head.APIVersion, head.Kind); ok {
		for _, vi := range v.ValidateAgentSandbox(k, n.Content[0]) {
			t.Errorf("%s: %s", f.Path, vi)
		}
		return
	}
	if err := k8s.validate(f.Data); err != nil {
		t.Errorf("%s: %v", f.Path, err)
	}
}

// TestAgentSandboxGolden renders every example with the agent-sandbox
// target, compares it with golden-agent-sandbox/<example>/
// (KEYHOLE_UPDATE=1 rewrites it), renders twice identically, validates
// every SandboxTemplate and carried object against agent-sandbox's CRDs
// and every other object against the Kubernetes schemas, and loads every
// proxy config as the proxy does.
func TestAgentSandboxGolden(t *testing.T) {
	k8s, err := loadSchemas()
	if err != nil {
		t.Fatal(err)
	}
	v := fixture.Validator(t)
	for _, ex := range examples(t) {
		t.Run(ex, func(t *testing.T) {
			dir := filepath.Join(examplesDir, ex)
			files := renderTargetTwice(t, RenderAgentSandbox, dir)
			templates := 0
			checkRendered(t, files, func(f File) {
				validateAgentSandboxFile(t, v, k8s, f)
				if strings.Contains(filepath.Base(f.Path), "deployment-") || strings.Contains(filepath.Base(f.Path), "networkpolicy-") {
					t.Errorf("%s: the agent-sandbox target writes no Deployment or NetworkPolicy of its own", f.Path)
				}
				if strings.HasPrefix(filepath.Base(f.Path), "sandboxtemplate-") {
					templates++
				}
			})
			if templates == 0 {
				t.Fatal("no SandboxTemplate rendered")
			}
			out := filepath.Join(goldenAgentSandboxDir, ex)
			checkDir(t, out, files)
		})
	}
}

// TestAgentSandboxNoSecret: with a canary as the Secrets' token, no file,
// stream, written file or diagnostic holds it, and no Secret is emitted.
func TestAgentSandboxNoSecret(t *testing.T) {
	noSecretRendered(t, RenderAgentSandbox, func(*testing.T, []File) {})
}

// sigsTemplate renders examples/sigs-agent-sandbox and returns its
// SandboxTemplate's pod spec and the template.
func sigsTemplate(t *testing.T) (pod, tmpl obj, files []File) {
	t.Helper()
	files, _ = mustRenderTarget(t, RenderAgentSandbox, compileDir(t, filepath.Join(examplesDir, sigsExample)))
	tmpl = find(t, objects(t, files), "SandboxTemplate", "aider-browser")
	return dig(tmpl, "spec", "podTemplate", "spec").(obj), tmpl, files
}

// TestAgentSandboxTemplate: the repository's template gets keyhole's init
// containers first, in order, then its own; its containers the
// placeholder, proxy and CA variables, the trust mount and the dropped
// capabilities; no container but the proxy mounts a Secret; the
// networkPolicy keeps the user's rules and adds the proxy's; the config
// hash rolls warm sandboxes; the warm pool is carried as written.
func TestAgentSandboxTemplate(t *testing.T) {
	pod, tmpl, files := sigsTemplate(t)
	var inits []string
	for _, c := range pod["initContainers"].(list) {
		inits = append(inits, c.(obj)["name"].(string))
	}
	// The kubernetes target's sidecar pod, whose init containers the
	// template gets, in its order, before its own.
	k8s := mustRender(t, compileDir(t, filepath.Join(examplesDir, sigsExample)), Options{})
	var want []string
	for _, c := range asList(dig(find(t, objects(t, k8s), "Deployment", "aider-browser-sandbox"), "spec", "template", "spec", "initContainers")) {
		want = append(want, c.(obj)["name"].(string))
	}
	if want = append(want, "git-clone"); !slices.Equal(inits, want) || inits[0] != "egress-transparent-init" || !slices.Contains(inits, compProxy) {
		t.Errorf("init containers %v, want %v", inits, want)
	}
	secretVolumes := map[string]bool{}
	for name, v := range volumes(obj{"spec": obj{"template": obj{"spec": pod}}}) {
		if v["secret"] != nil && !strings.HasPrefix(name, "egress-ca") {
			secretVolumes[name] = true
		}
	}
	if len(secretVolumes) != 2 {
		t.Errorf("Secret volumes %v, want the two Connections'", secretVolumes)
	}
	for _, key := range []string{"initContainers", "containers"} {
		for _, c := range asList(pod[key]) {
			c := c.(obj)
			name := c["name"].(string)
			for _, m := range asList(c["volumeMounts"]) {
				if v := m.(obj)["name"].(string); secretVolumes[v] && name != compProxy {
					t.Errorf("container %s mounts Secret volume %s", name, v)
				}
			}
			if name != "aider" && name != "git-clone" {
				continue
			}
			env := envOf(c)
			if env["OPENAI_API_KEY"] != "omnia-injected-openai" || env["HTTPS_PROXY"] != "http://127.0.0.1:3128" || env["SSL_CERT_FILE"] != BundleFile {
				t.Errorf("container %s env = %v", name, env)
			}
			drop := dig(c, "securityContext", "capabilities", "drop")
			for _, cap := range []string{"NET_ADMIN", "NET_RAW", "SETGID", "SETUID"} {
				if !slices.Contains(asList(drop), any(cap)) {
					t.Errorf("container %s keeps %s: drops %v", name, cap, drop)
				}
			}
		}
	}
	if got := fmt.Sprint(dig(pod, "securityContext", "fsGroup")); got != "1000" {
		t.Errorf("the template's fsGroup became %v", got)
	}
	if pod["automountServiceAccountToken"] != false || pod["serviceAccountName"] != "aider-browser-egress-proxy" {
		t.Errorf("pod identity: automount %v, serviceAccountName %v", pod["automountServiceAccountToken"], pod["serviceAccountName"])
	}
	if dig(tmpl, "spec", "podTemplate", "metadata", "annotations", configHashAnnotation) == nil {
		t.Error("no proxy config hash on the pod template: a new config would not roll warm sandboxes")
	}
	np := dig(tmpl, "spec", "networkPolicy").(obj)
	if got := len(asList(np["ingress"])); got != 1 {
		t.Errorf("ingress rules %d, want the template's one", got)
	}
	egress := asList(np["egress"])
	if len(egress) != 3 || !strings.Contains(mustYAML(t, egress[2]), "6443") {
		t.Errorf("egress = %s, want the template's two rules then keyhole's 443/6443", mustYAML(t, egress))
	}
	pool := find(t, objects(t, files), "SandboxWarmPool", "aider-warmpool")
	if dig(pool, "spec", "sandboxTemplateRef", "name") != "aider-browser" {
		t.Errorf("warm pool = %v", pool)
	}
	if _, ok := fileMap(files)["default/aider-browser/deployment-aider-browser-sandbox.yaml"]; ok {
		t.Error("a sandbox Deployment is rendered beside the template")
	}
}

func asList(v any) list { l, _ := v.(list); return l }

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	b, err := emitYAML(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAgentSandboxWithoutTemplate: a sandbox whose repository has no
// template of its name gets one with the sandbox's image, keyhole's pod
// and the controller's default ingress.
func TestAgentSandboxWithoutTemplate(t *testing.T) {
	files, ds := mustRenderTarget(t, RenderAgentSandbox, testPlan())
	if len(ds) != 0 {
		t.Errorf("diagnostics: %v", ds)
	}
	tmpl := find(t, objects(t, files), "SandboxTemplate", "support-workspace")
	pod := dig(tmpl, "spec", "podTemplate", "spec").(obj)
	c := pod["containers"].(list)[0].(obj)
	if c["image"] != "ghcr.io/acme/sandbox:1.0" || envOf(c)["GH_TOKEN"] != "omnia-injected-github-acme" {
		t.Errorf("sandbox container = %v", c)
	}
	if got := mustYAML(t, dig(tmpl, "spec", "networkPolicy", "ingress")); !strings.Contains(got, "sandbox-router") {
		t.Errorf("ingress = %s, want the controller's default (the sandbox router)", got)
	}
	if md := dig(tmpl, "metadata").(obj); md["name"] != "support-workspace" || md["namespace"] != "agents" {
		t.Errorf("metadata = %v", md)
	}
}

// templatePlan is testPlan with an input SandboxTemplate of its
// sandbox's name whose spec is spec.
func templatePlan(t *testing.T, spec string) compiler.Plan {
	t.Helper()
	p := testPlan()
	p.Objects = []compiler.Object{inputObject(t, "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\n"+
		"metadata: {name: support-workspace, namespace: agents}\nspec:\n"+spec)}
	return p
}

// TestAgentSandboxDiagnostics: each render-time finding by code; an
// error means no files, a warning does not stop the render.
func TestAgentSandboxDiagnostics(t *testing.T) {
	const c = "  podTemplate:\n    spec:\n      containers:\n        - name: work\n          image: busybox\n"
	tests := map[string]struct {
		spec string
		want []string // codes, sorted as the diagnostics are
	}{
		"clean":                          {spec: c},
		"host network":                   {spec: c + "      hostNetwork: true\n", want: []string{codeASTemplateUnsafe}},
		"shared process ns":              {spec: c + "      shareProcessNamespace: true\n", want: []string{codeASTemplateUnsafe}},
		"token automounted":              {spec: c + "      automountServiceAccountToken: true\n", want: []string{codeASTemplateUnsafe}},
		"own service account":            {spec: c + "      serviceAccountName: mine\n", want: []string{codeASTemplateUnsafe}},
		"pod runs as proxy":              {spec: c + "      securityContext: {runAsUser: 64123}\n", want: []string{codeASTemplateUnsafe}},
		"privileged":                     {spec: c + "          securityContext: {privileged: true}\n", want: []string{codeASTemplateUnsafe}},
		"escalation":                     {spec: c + "          securityContext: {allowPrivilegeEscalation: true}\n", want: []string{codeASTemplateUnsafe}},
		"adds NET_ADMIN":                 {spec: c + "          securityContext: {capabilities: {add: [CAP_NET_ADMIN]}}\n", want: []string{codeASTemplateUnsafe}},
		"adds SETUID and ALL":            {spec: c + "          securityContext: {capabilities: {add: [setuid, ALL]}}\n", want: []string{codeASTemplateUnsafe, codeASTemplateUnsafe}},
		"container runs as proxy":        {spec: c + "          securityContext: {runAsUser: 64123}\n", want: []string{codeASTemplateUnsafe}},
		"keyhole's env var":              {spec: c + "          env: [{name: HTTPS_PROXY, value: http://elsewhere:3128}]\n", want: []string{codeASTemplateConflict}},
		"a placeholder's var":            {spec: c + "          env: [{name: GH_TOKEN, value: x}]\n", want: []string{codeASTemplateConflict}},
		"keyhole's mount":                {spec: c + "          volumeMounts: [{name: v, mountPath: /etc/keyhole/trust}]\n      volumes: [{name: v, emptyDir: {}}]\n", want: []string{codeASTemplateConflict}},
		"mounts a Secret of the proxy's": {spec: c + "          volumeMounts: [{name: secret-acme-github-token, mountPath: /x}]\n", want: []string{codeASTemplateUnsafe}},
		"mounts the CA key":              {spec: c + "          volumeMounts: [{name: egress-ca, mountPath: /x}]\n", want: []string{codeASTemplateUnsafe}},
		"keyhole's volume":               {spec: c + "      volumes: [{name: egress-trust, emptyDir: {}}]\n", want: []string{codeASTemplateConflict}},
		"keyhole's volume claimed":       {spec: "  volumeClaimTemplates: [{metadata: {name: proxy-config}, spec: {accessModes: [ReadWriteOnce]}}]\n" + c, want: []string{codeASTemplateConflict}},
		"keyhole's container":            {spec: c + "        - {name: egress-proxy, image: x}\n", want: []string{codeASTemplateConflict}},
		"unmanaged policy":               {spec: "  networkPolicyManagement: Unmanaged\n" + c, want: []string{codeASNetworkUnmanaged}},
		"claims set env":                 {spec: "  envVarsInjectionPolicy: Overrides\n" + c, want: []string{codeASClaimEnv}},
		"claims may add env":             {spec: "  envVarsInjectionPolicy: Allowed\n" + c, want: []string{codeASClaimEnv}},
		"claims may not":                 {spec: "  envVarsInjectionPolicy: Disallowed\n" + c},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			files, ds, err := RenderAgentSandbox(templatePlan(t, tc.spec), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range ds {
				got = append(got, d.Code)
				if d.Object.Kind != "SandboxTemplate" || d.Pos.Line == 0 || !strings.Contains(d.Message, "spec.") {
					t.Errorf("diagnostic %v does not name the template and its field", d)
				}
				if d.Severity != asSeverity(d.Code) {
					t.Errorf("%s has severity %v", d.Code, d.Severity)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("codes %v, want %v\n%v", got, tc.want, ds)
			}
			if ds.HasErrors() != (files == nil) {
				t.Errorf("errors %v, files %d", ds.HasErrors(), len(files))
			}
			if tc.spec == "  networkPolicyManagement: Unmanaged\n"+c {
				tmpl := find(t, objects(t, files), "SandboxTemplate", "support-workspace")
				if dig(tmpl, "spec", "networkPolicy") != nil {
					t.Error("an Unmanaged template was given a networkPolicy")
				}
			}
		})
	}
}

// TestAgentSandboxUnmanagedNamesPorts: the warning on an Unmanaged
// template names the ports the policy it leaves out admits, those of a
// forward proxy and a collector included, which whatever manages the
// pods' policy must then admit.
func TestAgentSandboxUnmanagedNamesPorts(t *testing.T) {
	c := "  podTemplate:\n    spec:\n      containers:\n        - {name: agent, image: ghcr.io/acme/agent:1}\n"
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{}, "(DNS, TCP 443 and 6443)"},
		{Options{UpstreamProxy: "http://egress.corp:3128", OTLPEndpoint: "http://otel.observability:4318"}, "(DNS, TCP 443, 6443, 3128 and 4318)"},
	} {
		_, ds, err := RenderAgentSandbox(templatePlan(t, "  networkPolicyManagement: Unmanaged\n"+c), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 1 || ds[0].Code != codeASNetworkUnmanaged || !strings.Contains(ds[0].Message, tc.want) {
			t.Errorf("with %+v: %v, want one %s naming %s", tc.opts, ds, codeASNetworkUnmanaged, tc.want)
		}
	}
}

// TestAgentSandboxUnboundTemplate: a template named after no sandbox is
// carried as written, with an info that names the namespace's sandboxes.
func TestAgentSandboxUnboundTemplate(t *testing.T) {
	p := testPlan()
	p.Objects = []compiler.Object{inputObject(t, "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\n"+
		"metadata: {name: other, namespace: agents}\nspec: {podTemplate: {spec: {containers: [{name: a, image: b}]}}}\n")}
	files, ds, err := RenderAgentSandbox(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 1 || ds[0].Code != codeASTemplateUnbound || ds[0].Severity != diag.Info || !strings.Contains(ds[0].Message, "support-workspace") {
		t.Fatalf("diagnostics %v", ds)
	}
	carried := find(t, objects(t, files), "SandboxTemplate", "other")
	if dig(carried, "spec", "podTemplate", "spec", "initContainers") != nil {
		t.Error("an unbound template was given keyhole's init containers")
	}
	find(t, objects(t, files), "SandboxTemplate", "support-workspace")
}

// TestAgentSandboxRules: the codes are documented once each, errors and
// warnings as the renderer reports them.
func TestAgentSandboxRules(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range AgentSandboxRules() {
		if seen[r.Code] || r.Purpose == "" || r.Help == "" {
			t.Errorf("rule %+v is repeated or undocumented", r)
		}
		seen[r.Code] = true
	}
}

// TestAgentSandboxRefusesDeploymentMode: the proxy runs in the sandbox's
// pod; a proxy Deployment has no place in a template.
func TestAgentSandboxRefusesDeploymentMode(t *testing.T) {
	_, _, err := RenderAgentSandbox(testPlan(), Options{ProxyMode: ModeDeployment})
	if !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("err = %v, want ErrInvalidOptions", err)
	}
	if _, _, err := RenderAgentSandbox(compiler.Plan{}, Options{}); !errors.Is(err, ErrEmpty) {
		t.Fatalf("an empty plan: err = %v, want ErrEmpty", err)
	}
}

// FuzzRenderAgentSandbox: any template spec renders, is refused with
// diagnostics, or fails with an error of the package; never a panic. What
// renders decodes again, starts with the transparent-mode rules and runs
// the proxy.
func FuzzRenderAgentSandbox(f *testing.F) {
	for _, s := range []string{
		"  podTemplate:\n    spec:\n      containers: [{name: a, image: b, env: [{name: X, value: y}]}]\n",
		"  networkPolicy: {egress: [{ports: [{port: 53}]}]}\n  podTemplate: {spec: {containers: [{name: a}], securityContext: {fsGroup: 3}}}\n",
		"  podTemplate: {spec: {containers: [{name: a, securityContext: {capabilities: {drop: [ALL]}}}]}}\n",
		"  podTemplate: {spec: {containers: [1, [2], {name: 3}], initContainers: {}, volumes: x}}\n",
		"  podTemplate: {metadata: {annotations: []}, spec: {securityContext: []}}\n",
		"  networkPolicy: []\n  podTemplate: {spec: {containers: [{env: 1, volumeMounts: {}, securityContext: {capabilities: []}}]}}\n",
		"  podTemplate: null\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p := testPlan()
		docs, ds := source.Parse("in.yaml", []byte("apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\n"+
			"metadata: {name: support-workspace, namespace: agents}\nspec:\n"+spec))
		if len(ds) > 0 || len(docs) != 1 || docs[0].Node == nil {
			return
		}
		p.Objects = []compiler.Object{{Source: docs[0].Object(), Pos: docs[0].Pos, Node: docs[0].Node}}
		files, diags, err := RenderAgentSandbox(p, Options{})
		if err != nil {
			if !errors.Is(err, ErrInvalidPlan) {
				t.Fatalf("error of no class: %v", err)
			}
			return
		}
		if diags.HasErrors() {
			if files != nil {
				t.Fatal("files beside errors")
			}
			return
		}
		tmpl := find(t, objects(t, files), "SandboxTemplate", "support-workspace")
		inits := asList(dig(tmpl, "spec", "podTemplate", "spec", "initContainers"))
		if len(inits) < 3 || inits[0].(obj)["name"] != "egress-transparent-init" || !slices.ContainsFunc(inits, func(c any) bool { return c.(obj)["name"] == compProxy }) {
			t.Fatalf("init containers %v", inits)
		}
	})
}

// TestAgentSandboxTemplateRenamed: an overlay's namePrefix or nameSuffix
// renames the AgentRuntime, the SandboxClass and the SandboxTemplate
// alike, so the template no longer has the sandbox's name; it is still
// the sandbox's, and the warm pool that names it starts sandboxes with
// the egress proxy. A template that two sandboxes could be is neither's.
func TestAgentSandboxTemplateRenamed(t *testing.T) {
	const spec = "spec:\n  podTemplate:\n    spec:\n      containers:\n        - name: work\n          image: busybox\n"
	tests := map[string]struct {
		runtime, class string // the sandbox's names, as built
		templates      []string
		bound          string // the template given the proxy, "" for none
	}{
		"prefix":                 {runtime: "prod-coder", class: "prod-workspace", templates: []string{"prod-coder-workspace"}, bound: "prod-coder-workspace"},
		"suffix":                 {runtime: "coder-eu", class: "workspace-eu", templates: []string{"coder-workspace-eu"}, bound: "coder-workspace-eu"},
		"both":                   {runtime: "p-coder-s", class: "p-workspace-s", templates: []string{"p-coder-workspace-s"}, bound: "p-coder-workspace-s"},
		"exact name wins":        {runtime: "prod-coder", class: "prod-workspace", templates: []string{"prod-coder-workspace", "prod-coder-prod-workspace"}, bound: "prod-coder-prod-workspace"},
		"another sandbox's name": {runtime: "prod-coder", class: "prod-workspace", templates: []string{"prod-other-workspace"}},
		"no shared affix":        {runtime: "prod-coder", class: "dev-workspace", templates: []string{"prod-coder-workspace"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := testPlan()
			sb := &p.Sandboxes[0]
			sb.Source.Name, sb.Class, sb.Name = tc.runtime, tc.class, tc.runtime+"-"+tc.class
			sb.Proxy.Sandbox.Name = sb.Name
			for _, tmpl := range tc.templates {
				p.Objects = append(p.Objects,
					inputObject(t, "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxTemplate\nmetadata: {name: "+tmpl+", namespace: agents}\n"+spec),
					inputObject(t, "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: "+tmpl+"-pool, namespace: agents}\n"+
						"spec: {replicas: 2, sandboxTemplateRef: {name: "+tmpl+"}}\n"))
			}
			files, ds := mustRenderTarget(t, RenderAgentSandbox, p)
			objs := objects(t, files)
			for _, tmpl := range tc.templates {
				o := find(t, objs, "SandboxTemplate", tmpl)
				proxied := strings.Contains(mustYAML(t, dig(o, "spec", "podTemplate", "spec")), compProxy)
				if proxied != (tmpl == tc.bound) {
					t.Errorf("template %s carries the egress proxy: %v, want %v", tmpl, proxied, tmpl == tc.bound)
				}
				unbound := strings.Contains(ds.Error(), "SandboxTemplate agents/"+tmpl+" is no sandbox's")
				if unbound == (tmpl == tc.bound) {
					t.Errorf("template %s said unbound: %v\n%v", tmpl, unbound, ds)
				}
				if unbound && !strings.Contains(ds.Error(), "SandboxWarmPool agents/"+tmpl+"-pool start sandboxes from it") {
					t.Errorf("the unbound template's message does not name the warm pool that uses it:\n%v", ds)
				}
			}
			if tc.bound == "" {
				// The sandbox gets a template of its own name instead.
				find(t, objs, "SandboxTemplate", sb.Name)
			}
		})
	}
}

// TestAffixed: the names a single prefix and suffix make of runtime-class.
func TestAffixed(t *testing.T) {
	tests := []struct {
		runtime, class, name string
		want                 bool
	}{
		{runtime: "prod-coder", class: "prod-workspace", name: "prod-coder-workspace", want: true},
		{runtime: "coder", class: "workspace", name: "coder-workspace"}, // no affix: the plain name is bound by name
		{runtime: "a-x", class: "a-y", name: "a-x-y", want: true},
		{runtime: "ax", class: "ay", name: "ax-y", want: true},
		{runtime: "prod-coder", class: "prod-workspace", name: "prod-coder-prod-workspace"},
		{runtime: "prod-coder", class: "prod-workspace", name: "prod-codex-workspace"},
		{runtime: "", class: "", name: "-"},
		{runtime: "p", class: "p", name: "p-"},
	}
	for _, tc := range tests {
		if got := affixed(tc.runtime, tc.class, tc.name); got != tc.want {
			t.Errorf("affixed(%q, %q, %q) = %v, want %v", tc.runtime, tc.class, tc.name, got, tc.want)
		}
	}
}
