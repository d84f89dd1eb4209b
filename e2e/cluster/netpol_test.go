//go:build e2e

package cluster

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"

	"keyhole.dev/keyhole/internal/e2ekube"
)

// startPolicyController runs kube-router's network policy controller (and
// nothing else of kube-router: no routing, no service proxy, no CNI
// config) against the cluster, so the rendered NetworkPolicies are
// enforced. It programs iptables and ipsets in the test's network
// namespace only. Security flaws are reported for this release; it runs
// nowhere but in these private namespaces.
func (c *cluster) startPolicyController(ctx context.Context) error {
	p, err := c.run("kube-router", c.tools[toolKubeRouter],
		"--kubeconfig="+c.kubeconfig,
		"--run-firewall=true",
		"--run-router=false",
		"--run-service-proxy=false",
		"--enable-cni=false",
		"--enable-ipv6=false",
		"--hostname-override="+nodeName,
		"--service-cluster-ip-range="+serviceCIDR,
		"--health-port=0",
		"--metrics-port=0",
		"--v=1",
	)
	if err != nil {
		return err
	}
	// Ready once it has hooked its chains into the filter table.
	return e2ekube.WaitReady(ctx, p, readyTimeout, 60, func(ctx context.Context) bool {
		out, err := exec.CommandContext(ctx, c.tools[toolIptables], "-w", "-S", "FORWARD").Output()
		return err == nil && strings.Contains(string(out), "KUBE-ROUTER-FORWARD")
	})
}

// bystanderNS holds a pod that is neither sandbox nor proxy: another
// workload of the cluster.
const bystanderNS = "bystander"

// startBystander runs a pod from the sandbox image that serves HTTP on
// 8080, in its own namespace, and returns its address.
func (c *cluster) startBystander(t *testing.T, ctx context.Context) string {
	t.Helper()
	pod := `apiVersion: v1
kind: Namespace
metadata: {name: ` + bystanderNS + `}
---
apiVersion: v1
kind: Pod
metadata: {name: bystander, namespace: ` + bystanderNS + `, labels: {app: bystander}}
spec:
  automountServiceAccountToken: false
  # python3 as PID 1 ignores SIGTERM: without this, deleting the pod
  # waits out the default 30 s grace.
  terminationGracePeriodSeconds: 0
  containers:
  - name: bystander
    image: ` + sandboxImage + `
    imagePullPolicy: Never
    command: [python3, -m, http.server, "8080"]
`
	if _, err := c.kubectl(ctx, []byte(pod), "apply", "--server-side", "--field-manager=keyhole-e2e", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubectl(ctx, nil, "wait", "--for=condition=Ready", "-n", bystanderNS, "pod/bystander", "--timeout="+podTimeout); err != nil {
		t.Fatal(err)
	}
	ip, err := c.kubectl(ctx, nil, "get", "pod", "bystander", "-n", bystanderNS, "-o", "jsonpath={.status.podIP}")
	if err != nil || net.ParseIP(ip) == nil {
		t.Fatalf("the bystander's address %q: %v", ip, err)
	}
	return ip
}

func (c *cluster) removeBystander(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := c.kubectl(ctx, nil, "delete", "namespace", bystanderNS, "--wait=true", "--timeout=120s"); err != nil {
		t.Errorf("removing namespace %s: %v", bystanderNS, err)
	}
}

// reach is what curl gets for URL from a container: "ok CODE" or
// "err EXIT" (7: refused, 28: timed out, 56: reset).
func (c *cluster) reach(ctx context.Context, ns, target, container, url string) string {
	out, _ := c.kubectl(ctx, nil, "exec", "-n", ns, target, "-c", container, "--", "/bin/sh", "-c",
		`curl --noproxy '*' -sS -o /dev/null -w '%{http_code}' --connect-timeout 4 --max-time 8 `+url+` 2>/dev/null; echo " $?"`)
	code, exit, _ := strings.Cut(strings.TrimSpace(out), " ")
	if exit == "0" {
		return "ok " + code
	}
	return "err " + exit
}

// checkNetworkPolicy asserts, with the rendered NetworkPolicies enforced
// by kube-router, what the bystander (at address by) can reach of the
// rendered pods, and what the sandbox can reach of it and of the proxy.
func (c *cluster) checkNetworkPolicy(t *testing.T, ctx context.Context, mode, by string) {
	t.Run("network policy", func(t *testing.T) {
		sandbox := "deployment/" + acmeSandbox
		comp := "sandbox"
		if mode == "deployment" {
			comp = "egress-proxy"
		}
		proxyIP, err := c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS, "-l", "app.kubernetes.io/component="+comp,
			"--field-selector=status.phase=Running", "-o", "jsonpath={.items[0].status.podIP}")
		if err != nil || net.ParseIP(proxyIP) == nil {
			t.Fatalf("the proxy's pod address %q: %v", proxyIP, err)
		}
		// The kubelet's probes and the bystander itself show the
		// targets are there to be reached.
		if r := c.reach(ctx, bystanderNS, "pod/bystander", "bystander", "http://"+by+":8080/"); r != "ok 200" {
			t.Fatalf("the bystander does not serve itself: %s", r)
		}
		tests := map[string]struct {
			ns, from, container, url string
			want                     func(string) bool
			wants                    string
		}{
			"the sandbox cannot reach another pod": {
				ns: acmeNS, from: sandbox, container: "sandbox", url: "http://" + by + ":8080/",
				want: isRefused, wants: "a failure",
			},
			"another pod cannot reach the proxy": {
				ns: bystanderNS, from: "pod/bystander", container: "bystander", url: "http://" + net.JoinHostPort(proxyIP, "3128") + "/",
				want: isRefused, wants: "a failure",
			},
			"another pod reaches the admin port the rendered policy admits": {
				ns: bystanderNS, from: "pod/bystander", container: "bystander", url: "http://" + net.JoinHostPort(proxyIP, "9090") + "/healthz",
				want: func(r string) bool { return r == "ok 200" }, wants: "ok 200",
			},
		}
		if mode == "deployment" {
			tests["the sandbox reaches the proxy"] = struct {
				ns, from, container, url string
				want                     func(string) bool
				wants                    string
			}{
				ns: acmeNS, from: sandbox, container: "sandbox", url: "http://" + net.JoinHostPort(proxyIP, "3128") + "/",
				want: func(r string) bool { return strings.HasPrefix(r, "ok ") }, wants: "an HTTP answer",
			}
			tests["the sandbox cannot reach the proxy's admin port"] = struct {
				ns, from, container, url string
				want                     func(string) bool
				wants                    string
			}{
				ns: acmeNS, from: sandbox, container: "sandbox", url: "http://" + net.JoinHostPort(proxyIP, "9090") + "/healthz",
				want: isRefused, wants: "a failure",
			}
		}
		for name, tc := range tests {
			t.Run(name, func(t *testing.T) {
				if r := c.reach(ctx, tc.ns, tc.from, tc.container, tc.url); !tc.want(r) {
					t.Errorf("%s: %s, want %s", tc.url, r, tc.wants)
				}
			})
		}
	})
}

func isRefused(r string) bool { return strings.HasPrefix(r, "err ") }
