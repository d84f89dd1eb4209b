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
			if want := []string{"egress-transparent-init", "egress-trust-publish", "egress-proxy"}; !slices.Equal(names, want) {
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
			ni := container(t, sandbox, "egress-transparent-init")
			if got, want := fmt.Sprint(ni["args"]), fmt.Sprintf("[transparent-init --proxy-uid %d --port %d]", proxyUID, TransparentPort); got != want {
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
