//go:build e2e

package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/e2ekube"
	"keyhole.dev/keyhole/schema"
)

// What the agent-sandbox test creates beside the render.
const (
	asPool  = "support-workspace-pool"
	asClaim = "session-1"
)

// TestAgentSandboxLive runs kubernetes-sigs/agent-sandbox's own
// controller (scripts/agent-sandbox-controller.sh builds it from the Go
// module proxy) in the cluster, renders examples/github-acme with
// --target agent-sandbox (pointed at the fake GitHub as TestGitHubAcme
// points the kubernetes target), applies it with a warm pool and a
// SandboxClaim, and lets the controller make the Sandboxes and their
// pods from the rendered template. In the claimed sandbox's running pod,
// git and curl holding only the placeholder get the token injected, a
// request no rule allows is refused, and nothing the container can read
// holds the Secret's value; the warm pool's pod runs the same proxy.
func TestAgentSandboxLive(t *testing.T) {
	ctx := context.Background()
	c := the
	c.prepareRenders(t, ctx)
	c.installAgentSandboxCRDs(t, ctx)
	out, err := script(c.tools[repoRoot], "agent-sandbox-controller.sh")
	if err != nil {
		t.Fatalf("%v (scripts/test-deps.sh builds it before the run, with the Go module proxy reachable)", err)
	}
	ctrl, err := c.run("agent-sandbox-controller", out[len(out)-1], "--kubeconfig", c.kubeconfig,
		"--leader-elect=false", "--extensions", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Stop(stopTimeout)

	token := "ghp_keyholeE2Ecanary" + randomSuffix(t)
	up, err := startUpstream(t.TempDir(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()

	dir := c.renderAcme(t, "--target", "agent-sandbox")
	c.deployAcme(t, ctx, dir, up, token)
	defer c.removeAcme(t, ctx)
	objs := fmt.Sprintf(`apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxWarmPool
metadata: {name: %s, namespace: %s}
spec: {replicas: 1, sandboxTemplateRef: {name: support-workspace}}
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata: {name: %s, namespace: %s}
spec: {warmPoolRef: {name: %s}}
`, asPool, acmeNS, asClaim, acmeNS, asPool)
	if _, err := c.kubectl(ctx, []byte(objs), "apply", "--server-side", "--field-manager=keyhole-e2e", "-f", "-"); err != nil {
		t.Fatal(err)
	}

	pod := c.claimedPod(t, ctx, ctrl.Log)
	sh := func(script string) (string, error) {
		return c.kubectl(ctx, nil, "exec", "-n", acmeNS, pod, "-c", "sandbox", "--", "/bin/sh", "-c", script)
	}
	head, err := up.head()
	if err != nil {
		t.Fatal(err)
	}
	tests := githubChecks(head, true)
	tests["nothing the sandbox can read holds the Secret"] = sandboxCheck{script: sandboxListing(""), want: sandboxListingWants}
	runSandboxChecks(t, sh, func() string { return c.explain(ctx, acmeNS, up.requests()) }, []string{token}, tests)

	t.Run("every sandbox pod of the template runs the proxy", func(t *testing.T) {
		if _, err := c.kubectl(ctx, nil, "wait", "-n", acmeNS, "--for=condition=Ready", "pods", "--all", "--timeout=300s"); err != nil {
			t.Fatal(err)
		}
		out, err := c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS,
			"-o", `jsonpath={range .items[*]}{.metadata.name}:{range .status.initContainerStatuses[*]}{.name}={.started},{end};{end}`)
		if err != nil {
			t.Fatal(err)
		}
		pods := strings.Split(strings.TrimSuffix(out, ";"), ";")
		if len(pods) < 2 {
			t.Errorf("pods %q, want the warm pool's and the claim's", pods)
		}
		for _, p := range pods {
			if !strings.Contains(p, "egress-proxy=true") {
				t.Errorf("pod %s does not run the egress proxy", p)
			}
		}
	})
}

// installAgentSandboxCRDs installs agent-sandbox's published CRDs, as
// its own install would, and waits until they are served.
func (c *cluster) installAgentSandboxCRDs(t *testing.T, ctx context.Context) {
	t.Helper()
	crds, err := schema.AgentSandboxCRDs()
	if err != nil {
		t.Fatal(err)
	}
	f := c.path("agent-sandbox-crds.yaml")
	if err := os.WriteFile(f, crds, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubectl(ctx, nil, "apply", "--server-side", "--field-manager=agent-sandbox", "-f", f); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubectl(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s", "-f", f); err != nil {
		t.Fatal(err)
	}
}

// claimedPod waits for the SandboxClaim's Sandbox and its pod to be
// ready, and names the pod (the Sandbox's name).
func (c *cluster) claimedPod(t *testing.T, ctx context.Context, controllerLog string) string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	var name string
	for time.Now().Before(deadline) {
		name, _ = c.kubectl(ctx, nil, "get", "sandboxclaim", asClaim, "-n", acmeNS, "-o", "jsonpath={.status.sandbox.name}")
		if name != "" {
			break
		}
		time.Sleep(time.Second)
	}
	if name == "" {
		claim, _ := c.kubectl(ctx, nil, "get", "sandboxclaims,sandboxes,pods", "-n", acmeNS, "-o", "yaml")
		t.Fatalf("the claim names no Sandbox after 5 minutes\n%s\ncontroller log:\n%s", claim, e2ekube.Tail(controllerLog, 40))
	}
	pod := "pod/" + name
	if _, err := c.kubectl(ctx, nil, "wait", "-n", acmeNS, "--for=condition=Ready", pod, "--timeout=300s"); err != nil {
		desc, _ := c.kubectl(ctx, nil, "describe", "pods", "-n", acmeNS)
		logs, _ := c.kubectl(ctx, nil, "logs", "-n", acmeNS, pod, "--all-containers", "--tail=40")
		t.Fatalf("%v\n%s\n%s\ncontroller log:\n%s", err, desc, logs, e2ekube.Tail(controllerLog, 40))
	}
	return pod
}
