package render

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/proxy/config"
)

// TestEgressOptions: a forward proxy and an OTLP collector named for the
// render reach the proxy (its config's upstreamProxy, its container's
// OTEL_EXPORTER_OTLP_ENDPOINT) in both modes, and the sidecar pod's
// NetworkPolicy admits their ports beside 443 and 6443, which it would
// otherwise refuse; the agent-sandbox target's policy, built from it,
// too. A port already admitted is not repeated.
func TestEgressOptions(t *testing.T) {
	const squid, collector = "http://squid.egress.svc.cluster.local:3128", "http://otel-collector.observability.svc:4318"
	tests := map[string]struct {
		opts      Options
		wantPorts []string // the sidecar policy's TCP ports, in order
		wantEnv   string
		wantProxy string
	}{
		"neither": {
			wantPorts: []string{"443", "6443"},
		},
		"forward proxy and collector": {
			opts:      Options{UpstreamProxy: squid, OTLPEndpoint: collector},
			wantPorts: []string{"443", "6443", "3128", "4318"},
			wantEnv:   collector,
			wantProxy: squid,
		},
		"default ports": {
			opts:      Options{UpstreamProxy: "http://squid.corp.example/", OTLPEndpoint: "https://otlp.vendor.example"},
			wantPorts: []string{"443", "6443", "80"},
			wantEnv:   "https://otlp.vendor.example",
			wantProxy: "http://squid.corp.example",
		},
		"one port for both": {
			opts:      Options{UpstreamProxy: "http://10.0.0.8:8080", OTLPEndpoint: "http://10.0.0.9:8080"},
			wantPorts: []string{"443", "6443", "8080"},
			wantEnv:   "http://10.0.0.9:8080",
			wantProxy: "http://10.0.0.8:8080",
		},
	}
	for name, tc := range tests {
		for _, mode := range modes {
			t.Run(name+"/"+mode, func(t *testing.T) {
				opts := tc.opts
				opts.ProxyMode = mode
				files := mustRender(t, testPlan(), opts)
				objs := objects(t, files)
				proxyJSON := fileMap(files)["agents/support-workspace/proxy.json"]
				c, err := config.Decode(proxyJSON)
				if err != nil {
					t.Fatalf("proxy.json does not load: %v", err)
				}
				switch u := c.UpstreamProxy; {
				case tc.wantProxy == "" && u != nil:
					t.Errorf("upstreamProxy %+v, want none", *u)
				case tc.wantProxy != "" && (u == nil || u.URL != tc.wantProxy || !u.AllowInternalAddress):
					t.Errorf("upstreamProxy %+v, want %s with its own address allowed", u, tc.wantProxy)
				}
				if err := c.Validate(); err != nil {
					t.Errorf("proxy.json does not validate: %v", err)
				}
				pod := findProxyPod(t, files, opts)
				env := envOf(container(t, pod, compProxy))
				if got := env[EnvOTLPEndpoint]; got != tc.wantEnv {
					t.Errorf("%s = %q, want %q", EnvOTLPEndpoint, got, tc.wantEnv)
				}
				for k := range env {
					if tc.wantEnv == "" && strings.HasPrefix(k, "OTEL_") {
						t.Errorf("the proxy container sets %s, which nobody asked for", k)
					}
				}
				if mode != ModeSidecar {
					return
				}
				np := find(t, objs, "NetworkPolicy", "support-workspace-sandbox")
				egress := dig(np, "spec", "egress").([]any)
				var ports []string
				for _, p := range egress[len(egress)-1].(obj)["ports"].([]any) {
					ports = append(ports, fmt.Sprint(p.(obj)["port"]))
				}
				if !slices.Equal(ports, tc.wantPorts) {
					t.Errorf("egress ports %v, want %v", ports, tc.wantPorts)
				}
			})
		}
	}
}

// egressCanary stands where a URL could carry a credential.
const egressCanary = "keyholeEgressCanary"

// TestEgressOptionsRefused: a forward proxy or collector URL the proxy
// would refuse, or the kubelet would expand, is refused before anything
// is rendered, and the error shows no password, query or fragment.
func TestEgressOptionsRefused(t *testing.T) {
	for name, opts := range map[string]Options{
		"forward proxy over https":     {UpstreamProxy: "https://squid:3128"},
		"forward proxy with a user":    {UpstreamProxy: "http://u:" + egressCanary + "@squid:3128"},
		"forward proxy with a path":    {UpstreamProxy: "http://squid:3128/proxy"},
		"forward proxy without a host": {UpstreamProxy: "http://:3128"},
		"forward proxy port":           {UpstreamProxy: "http://squid:99999"},
		"collector scheme":             {OTLPEndpoint: "grpc://collector:4317"},
		"collector query":              {OTLPEndpoint: "http://collector:4318?api_key=" + egressCanary},
		"collector fragment":           {OTLPEndpoint: "http://collector:4318/#" + egressCanary},
		"collector password":           {OTLPEndpoint: "https://u:" + egressCanary + "@collector"},
		"collector expansion":          {OTLPEndpoint: "http://$(COLLECTOR):4318"},
		"collector quote":              {OTLPEndpoint: "http://collector:4318/'"},
	} {
		t.Run(name, func(t *testing.T) {
			files, err := Render(testPlan(), opts)
			if !errors.Is(err, ErrInvalidOptions) || files != nil {
				t.Fatalf("Render = %d files, %v; want %v", len(files), err, ErrInvalidOptions)
			}
			if strings.Contains(err.Error(), egressCanary) {
				t.Errorf("the error shows what could be a credential: %v", err)
			}
		})
	}
}

// TestEgressOptionsAgentSandbox: the agent-sandbox target's template
// carries the proxy's OTLP variable and, in the NetworkPolicy the
// controller writes from it, the same ports.
func TestEgressOptionsAgentSandbox(t *testing.T) {
	const collector = "http://otel-collector.observability.svc:4318"
	files, ds, err := RenderAgentSandbox(testPlan(), Options{UpstreamProxy: "http://squid.egress.svc:3128", OTLPEndpoint: collector})
	if err != nil || len(ds) != 0 {
		t.Fatalf("RenderAgentSandbox: %v %v", err, ds)
	}
	tmpl := find(t, objects(t, files), "SandboxTemplate", "support-workspace")
	egress := mustYAML(t, dig(tmpl, "spec", "networkPolicy", "egress"))
	for _, p := range []string{"port: 443", "port: 6443", "port: 3128", "port: 4318"} {
		if !strings.Contains(egress, p) {
			t.Errorf("the template's egress lacks %s:\n%s", p, egress)
		}
	}
	var found bool
	for _, c := range dig(tmpl, "spec", "podTemplate", "spec", "initContainers").(list) {
		if c := c.(obj); c["name"] == compProxy {
			found = envOf(c)[EnvOTLPEndpoint] == collector
		}
	}
	if !found {
		t.Errorf("the template's proxy container lacks %s=%s", EnvOTLPEndpoint, collector)
	}
}
