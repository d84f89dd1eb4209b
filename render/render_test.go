package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/proxy/config"
)

// canary stands for a secret value. The Plan never holds one, so it can
// only reach the output by a bug; tests assert it never does.
const canary = "CANARY-4b1d9e-never-rendered"

// testPlan is the github-acme example as a Plan: a claim bound to Connection
// github-acme in namespace agents, placeholder GH_TOKEN, api.github.com
// with a header and rules, github.com with basic auth, and the Secret
// acme-github-token with keys user and token.
func testPlan() compiler.Plan {
	return compiler.Plan{Sandboxes: []compiler.Sandbox{{
		Name:      "support-workspace",
		Namespace: "agents",
		Source:    diag.Object{APIVersion: "omnia.altairalabs.ai/v1alpha1", Kind: "AgentRuntime", Namespace: "agents", Name: "support"},
		Pos:       diag.Pos{File: "agents/support/runtime.yaml", Line: 1, Column: 1},
		Class:     "workspace",
		Image:     "ghcr.io/acme/sandbox:1.0",
		Proxy: config.Config{
			APIVersion: config.APIVersion,
			Kind:       config.Kind,
			Sandbox:    config.SandboxRef{Namespace: "agents", Name: "support-workspace"},
			Hosts: []config.Host{
				{
					Name:       "api.github.com",
					Connection: "github-acme",
					Inject: config.Inject{
						Secret: "acme-github-token",
						Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"},
					},
					Rules: []config.Rule{
						{Methods: []string{"GET", "HEAD"}, PathPrefixes: []string{"/repos/acme/widgets"}},
						{Methods: []string{"POST"}, PathPrefixes: []string{"/repos/acme/widgets/pulls"}},
					},
				},
				{
					Name:       "github.com",
					Connection: "github-acme",
					Inject: config.Inject{
						Secret: "acme-github-token",
						Basic:  &config.BasicInject{UsernameKey: "user", PasswordKey: "token"},
					},
				},
			},
		},
		Env: []compiler.EnvVar{{Name: "GH_TOKEN", Value: "omnia-injected-github-acme", Connection: "github-acme"}},
	}}}
}

// twoSandboxPlan adds a second sandbox in another namespace, with no
// namespace of its own and no image, to exercise the defaults.
func twoSandboxPlan() compiler.Plan {
	p := testPlan()
	p.Sandboxes = append(p.Sandboxes, compiler.Sandbox{
		Name:  "triage",
		Class: "daytona",
		Proxy: config.Config{
			Sandbox:     config.SandboxRef{Name: "triage"},
			Passthrough: []string{"pypi.org"},
		},
	})
	return p
}

func mustRender(t *testing.T, p compiler.Plan, opts Options) []File {
	t.Helper()
	files, err := Render(p, opts)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	return files
}

func fileMap(files []File) map[string][]byte {
	m := make(map[string][]byte, len(files))
	for _, f := range files {
		m[f.Path] = f.Data
	}
	return m
}

// objects decodes every Kubernetes object among files, keyed by path.
func objects(t *testing.T, files []File) map[string]obj {
	t.Helper()
	out := map[string]obj{}
	for _, f := range files {
		if !strings.HasSuffix(f.Path, ".yaml") || f.Path == "kustomization.yaml" {
			continue
		}
		var o obj
		if err := yaml.Unmarshal(f.Data, &o); err != nil {
			t.Fatalf("%s: %v", f.Path, err)
		}
		out[f.Path] = o
	}
	return out
}

// streamObjects decodes each document of a multi-document stream.
func streamObjects(t *testing.T, stream []byte) []obj {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(stream))
	var objs []obj
	for {
		var o obj
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
}

// find returns the object of kind and name, failing the test without it.
func find(t *testing.T, objs map[string]obj, kind, name string) obj {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == kind && o["metadata"].(obj)["name"] == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(obj)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

var modes = []string{ModeSidecar, ModeDeployment}

// TestTrustObjects checks the per-claim trust objects (docs/spec.md §7)
// against the render: the placeholder, the CA Secret's Certificate and the trust
// ConfigMap.
func TestTrustObjects(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			files := mustRender(t, testPlan(), Options{ProxyMode: mode})
			fm := fileMap(files)
			var env map[string]string
			if err := json.Unmarshal(fm["agents/support-workspace/env.json"], &env); err != nil {
				t.Fatalf("env.json: %v", err)
			}
			if got := env["GH_TOKEN"]; got != "omnia-injected-github-acme" {
				t.Errorf("env.json GH_TOKEN = %q, want omnia-injected-github-acme", got)
			}
			if !bytes.Contains(fm["agents/support-workspace/.env"], []byte("\nGH_TOKEN='omnia-injected-github-acme'\n")) {
				t.Errorf(".env lacks GH_TOKEN:\n%s", fm["agents/support-workspace/.env"])
			}
			objs := objects(t, files)
			cert := find(t, objs, "Certificate", "support-workspace-egress-ca")
			if got := dig(cert, "spec", "secretName"); got != "support-workspace-egress-ca" {
				t.Errorf("Certificate secretName = %v", got)
			}
			if dig(cert, "spec", "isCA") != true || dig(cert, "spec", "privateKey", "algorithm") != "ECDSA" || dig(cert, "spec", "privateKey", "size") != 256 {
				t.Errorf("Certificate is not an ECDSA P-256 CA: %v", cert["spec"])
			}
			find(t, objs, "ConfigMap", "support-workspace-egress-trust")
			dep := find(t, objs, "Deployment", "support-workspace-sandbox")
			sandbox := container(t, dep, "sandbox")
			if got := envOf(sandbox)["GH_TOKEN"]; got != "omnia-injected-github-acme" {
				t.Errorf("sandbox container GH_TOKEN = %q", got)
			}
		})
	}
}

func podSpec(o obj) obj { return dig(o, "spec", "template", "spec").(obj) }

func allContainers(o obj) []obj {
	var out []obj
	for _, field := range []string{"initContainers", "containers"} {
		cs, _ := podSpec(o)[field].([]any)
		for _, c := range cs {
			out = append(out, c.(obj))
		}
	}
	return out
}

func container(t *testing.T, o obj, name string) obj {
	t.Helper()
	for _, c := range allContainers(o) {
		if c["name"] == name {
			return c
		}
	}
	t.Fatalf("%s has no container %s", dig(o, "metadata", "name"), name)
	return nil
}

func envOf(c obj) map[string]string {
	m := map[string]string{}
	es, _ := c["env"].([]any)
	for _, e := range es {
		e := e.(obj)
		if v, ok := e["value"].(string); ok {
			m[e["name"].(string)] = v
		}
	}
	return m
}

// volumes maps a pod's volume names to their definitions.
func volumes(o obj) map[string]obj {
	m := map[string]obj{}
	vs, _ := podSpec(o)["volumes"].([]any)
	for _, v := range vs {
		v := v.(obj)
		m[v["name"].(string)] = v
	}
	return m
}

// TestSandboxMountsNoSecret: the sandbox container mounts only the trust
// bundle, from no Secret; with the proxy in its own Deployment the
// sandbox's pod has no Secret volume at all.
func TestSandboxMountsNoSecret(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			objs := objects(t, mustRender(t, testPlan(), Options{ProxyMode: mode}))
			dep := find(t, objs, "Deployment", "support-workspace-sandbox")
			vols := volumes(dep)
			sb := container(t, dep, "sandbox")
			mounts, _ := sb["volumeMounts"].([]any)
			if len(mounts) != 1 {
				t.Fatalf("sandbox container mounts %d volumes, want only the trust bundle", len(mounts))
			}
			m := mounts[0].(obj)
			if m["mountPath"] != TrustDir || m["readOnly"] != true {
				t.Errorf("sandbox mount = %v, want %s read-only", m, TrustDir)
			}
			v := vols[m["name"].(string)]
			if v == nil || v["secret"] != nil || v["projected"] != nil {
				t.Errorf("sandbox container mounts volume %v, want an emptyDir or ConfigMap", v)
			}
			if automount := podSpec(dep)["automountServiceAccountToken"]; automount != false {
				t.Errorf("automountServiceAccountToken = %v, want false", automount)
			}
			if mode == ModeDeployment {
				for name, v := range vols {
					if v["secret"] != nil || v["projected"] != nil {
						t.Errorf("sandbox pod has Secret or projected volume %s", name)
					}
				}
			}
		})
	}
}

// TestProxyMounts: the proxy mounts exactly the Secret keys it needs,
// read-only, and runs locked down with probes and requests.
func TestProxyMounts(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			objs := objects(t, mustRender(t, testPlan(), Options{ProxyMode: mode}))
			name := "support-workspace-sandbox"
			if mode == ModeDeployment {
				name = "support-workspace-egress-proxy"
			}
			dep := find(t, objs, "Deployment", name)
			vols := volumes(dep)
			token := vols["secret-acme-github-token"]
			if token == nil {
				t.Fatalf("no volume for Secret acme-github-token: %v", vols)
			}
			items := dig(token, "secret", "items").([]any)
			var keys []string
			for _, it := range items {
				keys = append(keys, it.(obj)["key"].(string))
			}
			if !slices.Equal(keys, []string{"token", "user"}) {
				t.Errorf("mounted keys = %v, want [token user]", keys)
			}
			ca := dig(vols[volCA], "secret", "secretName")
			if ca != "support-workspace-egress-ca" {
				t.Errorf("CA volume Secret = %v", ca)
			}
			proxy := container(t, dep, "egress-proxy")
			sc := proxy["securityContext"].(obj)
			if sc["runAsNonRoot"] != true || sc["readOnlyRootFilesystem"] != true || sc["allowPrivilegeEscalation"] != false ||
				!slices.Equal(dig(sc, "capabilities", "drop").([]any), []any{"ALL"}) || dig(sc, "seccompProfile", "type") != "RuntimeDefault" {
				t.Errorf("proxy securityContext not locked down: %v", sc)
			}
			for _, m := range proxy["volumeMounts"].([]any) {
				if m.(obj)["readOnly"] != true {
					t.Errorf("proxy mount %v is writable", m)
				}
			}
			if dig(proxy, "livenessProbe", "httpGet", "path") != "/healthz" || dig(proxy, "readinessProbe", "httpGet", "path") != "/readyz" {
				t.Errorf("proxy probes = %v / %v", proxy["livenessProbe"], proxy["readinessProbe"])
			}
			if dig(proxy, "resources", "requests", "memory") == nil {
				t.Errorf("proxy has no memory request")
			}
			if hash := dig(dep, "spec", "template", "metadata", "annotations", configHashAnnotation); (hash != nil) != (mode == ModeDeployment) {
				t.Errorf("pod template's %s: %v; want one only on the proxy's own Deployment", configHashAnnotation, hash)
			}
			// The init container that builds bundle.pem sees only ca.crt.
			bundle := container(t, dep, "egress-trust-publish")
			for _, m := range bundle["volumeMounts"].([]any) {
				v := vols[m.(obj)["name"].(string)]
				if s, ok := v["secret"].(obj); ok {
					its := s["items"].([]any)
					if len(its) != 1 || its[0].(obj)["key"] != "ca.crt" {
						t.Errorf("bundle init container mounts Secret keys %v, want only ca.crt", its)
					}
				}
			}
		})
	}
}

// TestConfigChangeRolls: a different proxy config gives the proxy
// Deployment's pod template a different annotation, so it rolls; the
// sidecar pod, the sandbox's own, keeps the same template, so a rule
// change does not restart the sandbox (its proxy reloads in place).
func TestConfigChangeRolls(t *testing.T) {
	template := func(p compiler.Plan, mode string, name string) any {
		objs := objects(t, mustRender(t, p, Options{ProxyMode: mode}))
		return dig(find(t, objs, "Deployment", name), "spec", "template")
	}
	p := testPlan()
	proxyBefore := fmt.Sprint(template(p, ModeDeployment, "support-workspace-egress-proxy"))
	sidecarBefore := fmt.Sprint(template(p, ModeSidecar, "support-workspace-sandbox"))
	p.Sandboxes[0].Proxy.Passthrough = []string{"pypi.org"}
	if after := fmt.Sprint(template(p, ModeDeployment, "support-workspace-egress-proxy")); after == proxyBefore {
		t.Errorf("the proxy Deployment's pod template did not change with the config")
	}
	if after := fmt.Sprint(template(p, ModeSidecar, "support-workspace-sandbox")); after != sidecarBefore {
		t.Errorf("the sidecar pod's template changed with the config: a rule change would restart the sandbox\nbefore %s\nafter  %s", sidecarBefore, after)
	}
}

// TestProxyConfigStrict: every rendered proxy.json decodes strictly into
// config.Config, equals the Plan's config with the mount paths filled in,
// and is the same bytes as the ConfigMap's copy.
func TestProxyConfigStrict(t *testing.T) {
	p := twoSandboxPlan()
	files := mustRender(t, p, Options{DefaultSandboxImage: "ghcr.io/acme/sandbox:1.0"})
	fm := fileMap(files)
	objs := objects(t, files)
	for _, sb := range p.Sandboxes {
		ns := sb.Namespace
		if ns == "" {
			ns = "default"
		}
		path := ns + "/" + sb.Name + "/proxy.json"
		data := fm[path]
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		var got config.Config
		if err := dec.Decode(&got); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		// And the proxy's own loader accepts it.
		if _, err := config.Decode(data); err != nil {
			t.Errorf("%s does not load into the proxy: %v", path, err)
		}
		want := sb.Proxy
		want.APIVersion, want.Kind = config.APIVersion, config.Kind
		want.SecretsDir = config.DefaultSecretsDir
		want.CA = config.CA{CertFile: config.DefaultCACert, KeyFile: config.DefaultCAKey}
		if want.Sandbox.Namespace == "" {
			want.Sandbox.Namespace = ns
		}
		gotJSON, _ := json.Marshal(got)
		wantJSON, _ := json.Marshal(want)
		if !bytes.Equal(gotJSON, wantJSON) {
			t.Errorf("%s decodes to\n%s\nwant\n%s", path, gotJSON, wantJSON)
		}
		cm := find(t, objs, "ConfigMap", sb.Name+"-egress-proxy")
		if dig(cm, "data", "proxy.json") != string(data) {
			t.Errorf("ConfigMap %s-egress-proxy differs from %s", sb.Name, path)
		}
		if !sortedJSONKeys(t, data) {
			t.Errorf("%s keys are not sorted:\n%s", path, data)
		}
	}
}

// sortedJSONKeys re-encodes data through a generic map (which sorts keys)
// with the same indentation and compares.
func sortedJSONKeys(t *testing.T, data []byte) bool {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	again, err := encodeJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(again, data)
}

// TestEnv: the full environment in both env files and the container.
func TestEnv(t *testing.T) {
	tests := map[string]struct {
		opts      Options
		proxy     string
		javaProxy string // the proxy host Java is given
		javaNon   string // Java's http.nonProxyHosts
	}{
		"sidecar":        {opts: Options{}, proxy: "http://127.0.0.1:3128", javaProxy: "127.0.0.1", javaNon: "localhost|127.*|[::1]"},
		"deployment":     {opts: Options{ProxyMode: ModeDeployment}, proxy: "http://$(SUPPORT_WORKSPACE_EGRESS_PROXY_SERVICE_HOST):3128", javaProxy: "$(SUPPORT_WORKSPACE_EGRESS_PROXY_SERVICE_HOST)", javaNon: "localhost|127.*|[::1]"},
		"extra no_proxy": {opts: Options{NoProxy: []string{".internal"}}, proxy: "http://127.0.0.1:3128", javaProxy: "127.0.0.1", javaNon: "localhost|127.*|[::1]|*.internal"},
		"explicit image": {opts: Options{ProxyImage: "example.com/p:1"}, proxy: "http://127.0.0.1:3128", javaProxy: "127.0.0.1", javaNon: "localhost|127.*|[::1]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			files := mustRender(t, testPlan(), tc.opts)
			fm := fileMap(files)
			noProxy := strings.Join(append([]string{"localhost", "127.0.0.1", "::1"}, tc.opts.NoProxy...), ",")
			want := map[string]string{
				"GH_TOKEN":    "omnia-injected-github-acme",
				"HTTPS_PROXY": tc.proxy, "https_proxy": tc.proxy,
				"HTTP_PROXY": tc.proxy, "http_proxy": tc.proxy,
				"NO_PROXY": noProxy, "no_proxy": noProxy,
				"REQUESTS_CA_BUNDLE": BundleFile, "GIT_SSL_CAINFO": BundleFile, "SSL_CERT_FILE": BundleFile,
				"NODE_EXTRA_CA_CERTS": BundleFile, "CURL_CA_BUNDLE": BundleFile,
				"AWS_CA_BUNDLE": BundleFile, "CARGO_HTTP_CAINFO": BundleFile, "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE": BundleFile,
				"DENO_CERT": BundleFile, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": BundleFile, "NPM_CONFIG_CAFILE": BundleFile,
				"NODE_USE_ENV_PROXY": "1",
				"WGETRC":             "/etc/keyhole/trust/wgetrc",
				"PHP_INI_SCAN_DIR":   ":/etc/keyhole/trust",
				"JAVA_TOOL_OPTIONS": "-Dhttps.proxyHost=" + tc.javaProxy + " -Dhttps.proxyPort=3128 -Dhttp.proxyHost=" + tc.javaProxy +
					" -Dhttp.proxyPort=3128 -Dhttp.nonProxyHosts=" + tc.javaNon +
					" -Djavax.net.ssl.trustStore=/etc/keyhole/trust/truststore.p12 -Djavax.net.ssl.trustStoreType=PKCS12",
			}
			var got map[string]string
			if err := json.Unmarshal(fm["agents/support-workspace/env.json"], &got); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("env.json = %v\nwant %v", got, want)
			}
			if dot := parseDotEnv(t, fm["agents/support-workspace/.env"]); fmt.Sprint(dot) != fmt.Sprint(want) {
				t.Errorf(".env = %v\nwant %v", dot, want)
			}
			dep := find(t, objects(t, files), "Deployment", "support-workspace-sandbox")
			if c := envOf(container(t, dep, "sandbox")); fmt.Sprint(c) != fmt.Sprint(want) {
				t.Errorf("container env = %v\nwant %v", c, want)
			}
			if tc.opts.ProxyImage != "" {
				pod := findProxyPod(t, files, tc.opts)
				for _, name := range []string{"egress-proxy", "egress-trust-publish"} {
					if img := container(t, pod, name)["image"]; img != tc.opts.ProxyImage {
						t.Errorf("container %s image = %v, want %s", name, img, tc.opts.ProxyImage)
					}
				}
			}
		})
	}
}

func findProxyPod(t *testing.T, files []File, opts Options) obj {
	name := "support-workspace-sandbox"
	if opts.ProxyMode == ModeDeployment {
		name = "support-workspace-egress-proxy"
	}
	return find(t, objects(t, files), "Deployment", name)
}

// parseDotEnv reads NAME='value' lines the way a POSIX shell would for
// the subset encodeDotEnv writes, failing on anything else.
func parseDotEnv(t *testing.T, data []byte) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, rest, ok := strings.Cut(line, "='")
		if !ok || !strings.HasSuffix(rest, "'") || strings.Contains(strings.TrimSuffix(rest, "'"), "'") || !envName.MatchString(name) {
			t.Fatalf(".env line %q is not NAME='value'", line)
		}
		m[name] = strings.TrimSuffix(rest, "'")
	}
	return m
}

// TestDeterministic: rendering twice, and rendering a shuffled plan,
// gives the same bytes; the files are sorted by path.
func TestDeterministic(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			opts := Options{ProxyMode: mode, DefaultSandboxImage: "ghcr.io/acme/sandbox:1.0"}
			a := mustRender(t, twoSandboxPlan(), opts)
			b := mustRender(t, twoSandboxPlan(), opts)
			rev := twoSandboxPlan()
			slices.Reverse(rev.Sandboxes)
			c := mustRender(t, rev, opts)
			for _, other := range [][]File{b, c} {
				if len(a) != len(other) {
					t.Fatalf("renders differ in length: %d, %d", len(a), len(other))
				}
				for i := range a {
					if a[i].Path != other[i].Path || !bytes.Equal(a[i].Data, other[i].Data) {
						t.Fatalf("renders differ at %s", a[i].Path)
					}
				}
			}
			if !slices.IsSortedFunc(a, func(x, y File) int { return strings.Compare(x.Path, y.Path) }) {
				t.Errorf("files are not sorted by path")
			}
		})
	}
}

// TestNoCanary: no rendered byte holds the canary standing for the
// example Secret's token. The Plan cannot carry it; TestExampleCanary plants it in
// a compiled repository.
func TestNoCanary(t *testing.T) {
	for _, mode := range modes {
		files := mustRender(t, testPlan(), Options{ProxyMode: mode})
		stream, err := Stream(files)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(files, File{Path: "stream", Data: stream}) {
			if bytes.Contains(f.Data, []byte(canary)) {
				t.Errorf("%s (%s) holds the canary", f.Path, mode)
			}
		}
	}
}

// TestLabels: every object carries the app.kubernetes.io labels.
func TestLabels(t *testing.T) {
	for path, o := range objects(t, mustRender(t, testPlan(), Options{ProxyMode: ModeDeployment})) {
		labels, _ := dig(o, "metadata", "labels").(obj)
		for _, k := range []string{"name", "instance", "component", "part-of", "managed-by"} {
			if labels["app.kubernetes.io/"+k] == nil {
				t.Errorf("%s lacks label app.kubernetes.io/%s", path, k)
			}
		}
		if dig(o, "metadata", "namespace") != "agents" {
			t.Errorf("%s namespace = %v", path, dig(o, "metadata", "namespace"))
		}
	}
}

// TestKustomizationListsEveryManifest: kustomization.yaml lists exactly
// the rendered manifests.
func TestKustomizationListsEveryManifest(t *testing.T) {
	files := mustRender(t, twoSandboxPlan(), Options{DefaultSandboxImage: "img:1"})
	var k struct {
		Resources []string `yaml:"resources"`
	}
	if err := yaml.Unmarshal(fileMap(files)["kustomization.yaml"], &k); err != nil {
		t.Fatal(err)
	}
	var want []string
	for p := range objects(t, files) {
		want = append(want, p)
	}
	slices.Sort(want)
	if !slices.Equal(k.Resources, want) {
		t.Errorf("kustomization resources = %v\nwant %v", k.Resources, want)
	}
}

// TestFluxSubstitution: an object whose bytes hold "${" is annotated so
// Flux leaves it alone; others are not.
func TestFluxSubstitution(t *testing.T) {
	p := testPlan()
	p.Sandboxes[0].Proxy.Hosts[0].Inject.Header.Value = "Bearer ${NOT_A_FLUX_VAR}{{ .token }}"
	objs := objects(t, mustRender(t, p, Options{}))
	for path, o := range objs {
		data, _ := encodeYAML(o)
		hasDollar := bytes.Contains(data, []byte("${"))
		annotated := dig(o, "metadata", "annotations", fluxSubstitute) == "disabled"
		if hasDollar != annotated {
			t.Errorf("%s: holds ${ = %v, annotated = %v", path, hasDollar, annotated)
		}
	}
	if dig(find(t, objs, "ConfigMap", "support-workspace-egress-proxy"), "metadata", "annotations", fluxSubstitute) != "disabled" {
		t.Errorf("proxy ConfigMap with ${ in a template is not annotated")
	}
}

// TestProxyOverrides: --proxy-resolve and --upstream-ca-configmap reach the
// proxy container's flags, in both modes, and the upstream CA is mounted
// from the named ConfigMap's ca.crt only.
func TestProxyOverrides(t *testing.T) {
	tests := map[string]struct {
		opts     Options
		wantArgs []string // after the fixed --config, --listen and --admin-listen
	}{
		"none": {opts: Options{}, wantArgs: []string{"--transparent-listen", "127.0.0.1:3129", "--dns-listen", "127.0.0.1:3053"}},
		"resolve and upstream CA, sidecar": {
			opts:     Options{ProxyResolve: []string{"github.com:443:10.88.0.1:8443", "api.github.com:443:[fd00::1]:8443"}, UpstreamCAConfigMap: "upstream-ca"},
			wantArgs: []string{"--resolve", "github.com:443:10.88.0.1:8443", "--resolve", "api.github.com:443:[fd00::1]:8443", "--upstream-ca", "/etc/keyhole/upstream-ca/ca.crt", "--transparent-listen", "127.0.0.1:3129", "--dns-listen", "127.0.0.1:3053"},
		},
		"upstream CA, deployment": {
			opts:     Options{ProxyMode: ModeDeployment, UpstreamCAConfigMap: "corp.egress-ca"},
			wantArgs: []string{"--upstream-ca", "/etc/keyhole/upstream-ca/ca.crt"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := findProxyPod(t, mustRender(t, testPlan(), tc.opts), tc.opts)
			proxy := container(t, pod, "egress-proxy")
			var args []string
			for _, a := range proxy["args"].([]any) {
				args = append(args, a.(string))
			}
			if got := args[6:]; !slices.Equal(got, tc.wantArgs) && len(got)+len(tc.wantArgs) > 0 {
				t.Errorf("proxy args after the fixed six = %q, want %q", got, tc.wantArgs)
			}
			vol := volumes(pod)[volUpstreamCA]
			if tc.opts.UpstreamCAConfigMap == "" {
				if vol != nil {
					t.Errorf("upstream CA volume without the option: %v", vol)
				}
				return
			}
			if dig(vol, "configMap", "name") != tc.opts.UpstreamCAConfigMap {
				t.Errorf("upstream CA volume = %v", vol)
			}
			if items := dig(vol, "configMap", "items").([]any); len(items) != 1 || items[0].(obj)["key"] != "ca.crt" {
				t.Errorf("upstream CA items = %v, want only ca.crt", items)
			}
		})
	}
}

// renderCanaryToken has a GitHub token's shape; no rendered file and no
// error may hold it.
const renderCanaryToken = "ghp_R3nd3rC4n4ryQx9Zr7Wm2Lp5Vb8Nd1Hs6Jf3"

// TestRenderErrors: a Plan or Options the renderer cannot honour is an
// error wrapping the right class, naming the sandbox, never a panic.
func TestRenderErrors(t *testing.T) {
	tests := map[string]struct {
		edit func(*compiler.Plan)
		opts Options
		want error
	}{
		"empty plan":        {edit: func(p *compiler.Plan) { p.Sandboxes = nil }, want: ErrEmpty},
		"unknown mode":      {opts: Options{ProxyMode: "daemonset"}, want: ErrInvalidOptions},
		"bad namespace opt": {opts: Options{DefaultNamespace: "Bad_NS"}, want: ErrInvalidOptions},
		"bad no_proxy":      {opts: Options{NoProxy: []string{"a,b"}}, want: ErrInvalidOptions},
		"resolve no addr":   {opts: Options{ProxyResolve: []string{"github.com:443"}}, want: ErrInvalidOptions},
		"resolve bad port":  {opts: Options{ProxyResolve: []string{"github.com:https:10.0.0.1"}}, want: ErrInvalidOptions},
		"resolve comma":     {opts: Options{ProxyResolve: []string{"github.com:443:10.0.0.1,10.0.0.2"}}, want: ErrInvalidOptions},
		"upstream CA name":  {opts: Options{UpstreamCAConfigMap: "Upstream_CA"}, want: ErrInvalidOptions},
		"no image":          {edit: func(p *compiler.Plan) { p.Sandboxes[0].Image = "" }, want: ErrInvalidPlan},
		"name not a label":  {edit: func(p *compiler.Plan) { p.Sandboxes[0].Name = "Support_WS" }, want: ErrInvalidPlan},
		"name too long":     {edit: func(p *compiler.Plan) { p.Sandboxes[0].Name = strings.Repeat("a", 51) }, want: ErrInvalidPlan},
		"bad namespace":     {edit: func(p *compiler.Plan) { p.Sandboxes[0].Namespace = "a.b" }, want: ErrInvalidPlan},
		"duplicate": {edit: func(p *compiler.Plan) {
			p.Sandboxes = append(p.Sandboxes, p.Sandboxes[0])
		}, want: ErrInvalidPlan},
		"env name": {edit: func(p *compiler.Plan) { p.Sandboxes[0].Env[0].Name = "GH-TOKEN" }, want: ErrInvalidPlan},
		"env overrides proxy": {edit: func(p *compiler.Plan) {
			p.Sandboxes[0].Env = append(p.Sandboxes[0].Env, compiler.EnvVar{Name: "HTTPS_PROXY", Value: "x"})
		}, want: ErrInvalidPlan},
		"env quote":   {edit: func(p *compiler.Plan) { p.Sandboxes[0].Env[0].Value = "it's" }, want: ErrInvalidPlan},
		"env newline": {edit: func(p *compiler.Plan) { p.Sandboxes[0].Env[0].Value = "a\nb" }, want: ErrInvalidPlan},
		"env twice": {edit: func(p *compiler.Plan) {
			p.Sandboxes[0].Env = append(p.Sandboxes[0].Env, compiler.EnvVar{Name: "GH_TOKEN", Value: "omnia-injected-other"})
		}, want: ErrInvalidPlan},
		"wrong config version": {edit: func(p *compiler.Plan) { p.Sandboxes[0].Proxy.APIVersion = "proxy.keyhole.dev/v9" }, want: ErrInvalidPlan},
		"literal header value": {edit: func(p *compiler.Plan) {
			p.Sandboxes[0].Proxy.Hosts[0].Inject.Header.Value = "Bearer ${GITHUB_TOKEN}"
		}, want: ErrInvalidPlan},
		"token in a header value": {edit: func(p *compiler.Plan) {
			p.Sandboxes[0].Proxy.Hosts[0].Inject.Header.Value = "Bearer {{ .token }} " + renderCanaryToken
		}, want: ErrInvalidPlan},
		"token in a rule": {edit: func(p *compiler.Plan) {
			p.Sandboxes[0].Proxy.Hosts[0].Rules[0].PathPrefixes = []string{"/x/" + renderCanaryToken}
		}, want: ErrInvalidPlan},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := testPlan()
			if tc.edit != nil {
				tc.edit(&p)
			}
			files, err := Render(p, tc.opts)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Render = %d files, %v; want %v", len(files), err, tc.want)
			}
			if strings.Contains(err.Error(), renderCanaryToken[4:]) || strings.Contains(err.Error(), "GITHUB_TOKEN") {
				t.Errorf("the error quotes the value: %v", err)
			}
			if files != nil {
				t.Errorf("Render returned files with an error")
			}
		})
	}
}

// TestSecretVolumeNames: volume names are DNS labels whatever the Secret
// name, and distinct Secrets get distinct volumes.
func TestSecretVolumeNames(t *testing.T) {
	tests := map[string]struct {
		secret string
		want   string
	}{
		"plain":  {secret: "acme-github-token", want: "secret-acme-github-token"},
		"dotted": {secret: "acme.github.token"},
		"long":   {secret: strings.Repeat("s", 100)},
	}
	seen := map[string]bool{}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := secretVolume(tc.secret)
			if !dnsLabel.MatchString(got) || len(got) > 63 {
				t.Errorf("secretVolume(%q) = %q, not a DNS label", tc.secret, got)
			}
			if tc.want != "" && got != tc.want {
				t.Errorf("secretVolume(%q) = %q, want %q", tc.secret, got, tc.want)
			}
			if seen[got] {
				t.Errorf("secretVolume(%q) = %q collides", tc.secret, got)
			}
			seen[got] = true
		})
	}
}

// TestOnlyProxyMountsKeys: the CA key and the credential Secrets are
// mounted into the proxy container and no other.
func TestOnlyProxyMountsKeys(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			for _, o := range objects(t, mustRender(t, testPlan(), Options{ProxyMode: mode})) {
				if o["kind"] != "Deployment" {
					continue
				}
				vols := volumes(o)
				for _, c := range allContainers(o) {
					mounts, _ := c["volumeMounts"].([]any)
					for _, m := range mounts {
						name := m.(obj)["name"].(string)
						secretVol := name == volCA || strings.HasPrefix(name, "secret-")
						if secretVol && c["name"] != compProxy {
							t.Errorf("container %s mounts %s", c["name"], name)
						}
						if vols[name] == nil {
							t.Errorf("container %s mounts undeclared volume %s", c["name"], name)
						}
					}
				}
			}
		})
	}
}

// TestNetworkPolicy: with the proxy in its own Deployment the sandbox may
// reach only its proxy's port, and no DNS server: it finds the proxy by
// the Service's variable, and its pod's resolver is its own loopback. The
// proxy admits only its sandbox on the proxy port.
func TestNetworkPolicy(t *testing.T) {
	objs := objects(t, mustRender(t, testPlan(), Options{ProxyMode: ModeDeployment}))
	np := find(t, objs, "NetworkPolicy", "support-workspace-sandbox")
	if got := dig(np, "spec", "policyTypes"); fmt.Sprint(got) != "[Egress]" {
		t.Errorf("policyTypes = %v", got)
	}
	egress := dig(np, "spec", "egress").([]any)
	if len(egress) != 1 {
		t.Fatalf("egress rules = %v, want the proxy alone", egress)
	}
	proxy := egress[0].(obj)
	pod := dig(find(t, objs, "Deployment", "support-workspace-sandbox"), "spec", "template", "spec")
	if dig(pod, "dnsPolicy") != "None" || fmt.Sprint(dig(pod, "dnsConfig", "nameservers")) != "[127.0.0.1]" || dig(pod, "enableServiceLinks") != true {
		t.Errorf("sandbox pod DNS = %v %v, service links %v; want None, [127.0.0.1], true", dig(pod, "dnsPolicy"), dig(pod, "dnsConfig"), dig(pod, "enableServiceLinks"))
	}
	// The variable the sandbox's proxy variables name is the one
	// Kubernetes sets for the rendered Service.
	svc := find(t, objs, "Service", "support-workspace-egress-proxy")
	wantProxy := "http://$(" + serviceHostVar(dig(svc, "metadata", "name").(string)) + "):" + fmt.Sprint(dig(svc, "spec", "ports").([]any)[0].(obj)["port"])
	for _, e := range dig(pod, "containers").([]any)[0].(obj)["env"].([]any) {
		if e := e.(obj); e["name"] == "HTTPS_PROXY" && e["value"] != wantProxy {
			t.Errorf("HTTPS_PROXY = %v, want %s", e["value"], wantProxy)
		}
	}
	to := proxy["to"].([]any)
	if len(to) != 1 || dig(to[0], "podSelector", "matchLabels", "app.kubernetes.io/component") != compProxy ||
		dig(to[0], "podSelector", "matchLabels", "app.kubernetes.io/instance") != "support-workspace" ||
		fmt.Sprint(proxy["ports"]) != fmt.Sprintf("[map[port:%d protocol:TCP]]", ProxyPort) {
		t.Errorf("proxy rule = %v", proxy)
	}
	pnp := find(t, objs, "NetworkPolicy", "support-workspace-egress-proxy")
	in := dig(pnp, "spec", "ingress").([]any)
	from := in[0].(obj)["from"].([]any)
	if dig(from[0], "podSelector", "matchLabels", "app.kubernetes.io/component") != compSandbox {
		t.Errorf("proxy ingress = %v", in)
	}
	// The admin port: every pod but keyhole's sandboxes, evaluated as a
	// network plugin does (any peer; every expression of a peer).
	admin := in[1].(obj)
	if fmt.Sprint(admin["ports"]) != fmt.Sprintf("[map[port:%d protocol:TCP]]", AdminPort) {
		t.Fatalf("admin rule = %v", admin)
	}
	peers, _ := admin["from"].([]any)
	if len(peers) == 0 {
		t.Fatalf("the admin port admits every source: %v", admin)
	}
	admits := func(labels map[string]string) bool {
		for _, p := range peers {
			if fmt.Sprint(dig(p, "namespaceSelector")) != "map[]" {
				t.Fatalf("admin peer %v: want every namespace", p)
			}
			all := true
			for _, e := range dig(p, "podSelector", "matchExpressions").([]any) {
				e := e.(obj)
				if e["operator"] != "NotIn" {
					t.Fatalf("admin peer expression %v", e)
				}
				if v, ok := labels[e["key"].(string)]; ok && slices.Contains(e["values"].([]any), any(v)) {
					all = false
				}
			}
			if all {
				return true
			}
		}
		return false
	}
	for who, c := range map[string]struct {
		labels map[string]string
		want   bool
	}{
		"this sandbox":              {labels: map[string]string{"app.kubernetes.io/component": compSandbox, "app.kubernetes.io/instance": "support-workspace", "app.kubernetes.io/name": "keyhole"}},
		"another keyhole sandbox":   {labels: map[string]string{"app.kubernetes.io/component": compSandbox, "app.kubernetes.io/instance": "other", "app.kubernetes.io/name": "keyhole"}},
		"a metrics scraper":         {labels: map[string]string{"app.kubernetes.io/name": "prometheus"}, want: true},
		"an unlabelled pod":         {labels: map[string]string{}, want: true},
		"another app's sandbox":     {labels: map[string]string{"app.kubernetes.io/component": compSandbox, "app.kubernetes.io/name": "other"}, want: true},
		"keyhole's trust publisher": {labels: map[string]string{"app.kubernetes.io/component": compProxy, "app.kubernetes.io/name": "keyhole"}, want: true},
	} {
		if got := admits(c.labels); got != c.want {
			t.Errorf("admin port admits %s: %v, want %v", who, got, c.want)
		}
	}
	svc = find(t, objs, "Service", "support-workspace-egress-proxy")
	if dig(svc, "spec", "selector", "app.kubernetes.io/component") != compProxy {
		t.Errorf("Service selector = %v", dig(svc, "spec", "selector"))
	}
}

// TestSharedUnchanged: rendering sandboxes leaves the parts every sandbox
// shares as they were built, in both proxy modes and with an object that
// takes the Flux substitution annotation, since the render workers read
// them at the same time.
func TestSharedUnchanged(t *testing.T) {
	for _, mode := range []string{ModeSidecar, ModeDeployment} {
		t.Run(mode, func(t *testing.T) {
			opts, err := Options{ProxyMode: mode, DefaultSandboxImage: "img:1", UpstreamCAConfigMap: "ca", ProxyResolve: []string{"a:443:b"}}.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			sh := newShared(opts)
			p := twoSandboxPlan()
			p.Sandboxes[0].Proxy.Hosts[0].Inject.Header.Value = "${TOKEN} {{ .token }}"
			var e emitter
			for _, sb := range p.Sandboxes {
				if sb.Namespace == "" {
					sb.Namespace = opts.DefaultNamespace
				}
				if _, err := renderSandbox(&e, sh, sb, sb.Namespace+"/"+sb.Name, opts); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(sh, newShared(opts)) {
				t.Error("rendering changed a part the sandboxes share")
			}
		})
	}
}

// TestRendererEnvIsReserved: every variable render sets in a sandbox is
// one the compiler's ConnectionPlaceholderEnvReserved keeps placeholders
// from taking, so that check refuses what render would.
func TestRendererEnvIsReserved(t *testing.T) {
	reserved := compiler.ReservedEnvNames()
	for _, mode := range modes {
		p := testPlan()
		p.Sandboxes[0].Env = nil
		env, err := envVars(p.Sandboxes[0], Options{ProxyMode: mode})
		if err != nil {
			t.Fatal(err)
		}
		if len(env) == 0 {
			t.Fatal("render sets no variable")
		}
		for _, v := range env {
			if !slices.Contains(reserved, v.Name) {
				t.Errorf("render sets %s (%s mode), which compiler.ReservedEnvNames lacks: check would let a placeholder take it", v.Name, mode)
			}
		}
	}
}
