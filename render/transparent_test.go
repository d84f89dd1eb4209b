package render

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestTransparentSidecar: the default render is enforcing. A sidecar pod
// installs the transparent-mode rules before any other container runs,
// exempting exactly the proxy's UID, which is nobody's usual UID; the
// sandbox loses what would let it become that UID or change the rules.
// Deployment mode needs none of it.
func TestTransparentSidecar(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			opts := Options{ProxyMode: mode}
			objs := objects(t, mustRender(t, testPlan(), opts))
			sandbox := find(t, objs, "Deployment", "support-workspace-sandbox")
			inits, _ := podSpec(sandbox)["initContainers"].([]any)
			var names []string
			for _, c := range inits {
				names = append(names, c.(obj)["name"].(string))
			}
			sec := container(t, sandbox, "sandbox")["securityContext"].(obj)
			if mode == ModeDeployment {
				if len(names) != 0 {
					t.Fatalf("deployment mode's sandbox pod has init containers %v", names)
				}
				return
			}
			if want := []string{"egress-transparent-init", "egress-trust-publish", "egress-trust-watch", "egress-proxy"}; !slices.Equal(names, want) {
				t.Fatalf("init containers %v, want %v (the rules first)", names, want)
			}
			proxy := container(t, sandbox, "egress-proxy")
			uid := dig(proxy, "securityContext", "runAsUser")
			if fmt.Sprint(uid) != fmt.Sprint(proxyUID) || proxyUID == 0 || proxyUID == 65532 || proxyUID == 65534 {
				t.Fatalf("proxy runs as %v; want proxyUID %d, no image's usual user", uid, proxyUID)
			}
			if dig(proxy, "securityContext", "runAsNonRoot") != true {
				t.Error("the proxy may run as root")
			}
			args := fmt.Sprint(proxy["args"])
			if !strings.Contains(args, fmt.Sprintf("--transparent-listen 127.0.0.1:%d", TransparentPort)) {
				t.Errorf("proxy args %s lack the transparent listener", args)
			}
			if !strings.Contains(args, fmt.Sprintf("--dns-listen 127.0.0.1:%d", DNSPort)) {
				t.Errorf("proxy args %s lack the DNS listener", args)
			}
			ni := container(t, sandbox, "egress-transparent-init")
			if got, want := fmt.Sprint(ni["args"]), fmt.Sprintf("[transparent-init --proxy-uid %d --port %d --dns-port %d --admin-port %d --names-dir %s]", proxyUID, TransparentPort, DNSPort, AdminPort, namesDir); got != want {
				t.Errorf("transparent-init args %s, want %s", got, want)
			}
			if ni["image"] != DefaultNetInitImage {
				t.Errorf("transparent-init image %v", ni["image"])
			}
			if got := fmt.Sprint(dig(ni, "securityContext", "capabilities")); got != "map[add:[NET_ADMIN] drop:[ALL]]" {
				t.Errorf("transparent-init capabilities %s, want NET_ADMIN only", got)
			}
			if got := fmt.Sprint(sec["capabilities"]); got != "map[drop:[NET_ADMIN NET_RAW SETGID SETUID]]" {
				t.Errorf("sandbox capabilities %s", got)
			}
			if sec["allowPrivilegeEscalation"] != false {
				t.Error("the sandbox may escalate privileges")
			}
			// No other container of the pod gets a capability.
			for _, c := range allContainers(sandbox) {
				if c["name"] == "egress-transparent-init" {
					continue
				}
				if add := dig(c, "securityContext", "capabilities", "add"); add != nil {
					t.Errorf("container %s adds capabilities %v", c["name"], add)
				}
			}
		})
	}
}

// TestSandboxPodIsolation: what the sandbox container shares with the
// proxy. Every container of a pod is given the same /etc/hosts (the
// kubelet's) and /etc/resolv.conf (the runtime's), writable by a sandbox
// that runs as root; the proxy dials upstreams by name, so in a sidecar
// pod it mounts its own copies, taken by the first init container before
// the sandbox starts, from a volume the sandbox never mounts. In either
// mode the sandbox has no raw sockets and cannot change the pod's
// network.
func TestSandboxPodIsolation(t *testing.T) {
	tests := map[string]struct {
		mode string
		// wantNames: the proxy's resolv.conf and hosts come from the
		// init container's copies.
		wantNames bool
	}{
		"sidecar":    {mode: ModeSidecar, wantNames: true},
		"deployment": {mode: ModeDeployment},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs := objects(t, mustRender(t, testPlan(), Options{ProxyMode: tc.mode}))
			sandbox := find(t, objs, "Deployment", "support-workspace-sandbox")
			sb := container(t, sandbox, "sandbox")
			drop := fmt.Sprint(dig(sb, "securityContext", "capabilities", "drop"))
			for _, c := range []string{"NET_ADMIN", "NET_RAW"} {
				if !strings.Contains(drop, c) {
					t.Errorf("the sandbox keeps %s (drops %s)", c, drop)
				}
			}
			var sandboxVols []string
			for _, m := range sb["volumeMounts"].([]any) {
				sandboxVols = append(sandboxVols, m.(obj)["name"].(string))
			}
			if !tc.wantNames {
				return
			}
			proxy := container(t, sandbox, "egress-proxy")
			var vol string
			for _, path := range []string{"/etc/hosts", "/etc/resolv.conf"} {
				var m obj
				proxyMounts, _ := proxy["volumeMounts"].([]any)
				for _, mm := range proxyMounts {
					if mm.(obj)["mountPath"] == path {
						m = mm.(obj)
					}
				}
				if m == nil {
					t.Fatalf("the proxy mounts no %s of its own: it reads the one the sandbox can write", path)
				}
				if m["readOnly"] != true || m["subPath"] != strings.TrimPrefix(path, "/etc/") {
					t.Errorf("the proxy's %s: %v, want read-only subPath %s", path, m, strings.TrimPrefix(path, "/etc/"))
				}
				vol = m["name"].(string)
			}
			if slices.Contains(sandboxVols, vol) {
				t.Errorf("the sandbox mounts %s, the proxy's name files", vol)
			}
			ni := container(t, sandbox, "egress-transparent-init")
			var niMount string
			niMounts, _ := ni["volumeMounts"].([]any)
			for _, mm := range niMounts {
				if mm.(obj)["name"] == vol {
					niMount = mm.(obj)["mountPath"].(string)
				}
			}
			if niMount == "" || !strings.Contains(fmt.Sprint(ni["args"]), "--names-dir "+niMount) {
				t.Errorf("egress-transparent-init does not copy the name files into %s: args %v, mounts %v", vol, ni["args"], ni["volumeMounts"])
			}
			for _, c := range allContainers(sandbox) {
				if n := c["name"]; n == "egress-proxy" || n == "egress-transparent-init" {
					continue
				}
				mounts, _ := c["volumeMounts"].([]any)
				for _, mm := range mounts {
					if mm.(obj)["name"] == vol {
						t.Errorf("container %s mounts %s", c["name"], vol)
					}
				}
			}
		})
	}
}
