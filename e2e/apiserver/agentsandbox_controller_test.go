//go:build e2e

package apiserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/internal/e2ekube"
	"keyhole.dev/keyhole/render"
)

// TestAgentSandboxControllerMakesPods runs agent-sandbox's own
// controller (built from the Go module proxy by
// scripts/agent-sandbox-controller.sh) against the test's API server,
// applies the agent-sandbox render of examples/sigs-agent-sandbox and a
// SandboxClaim, and reads the Sandboxes and pods the controller makes
// from the template: every pod runs keyhole's init containers first, holds the placeholder where the key was, and no container but
// the proxy mounts a Secret the proxy injects; the NetworkPolicy the
// controller writes from the template carries keyhole's egress rules.
// No kubelet runs here, so the pods stay Pending: what they would run is
// what is checked, not that they run.
func TestAgentSandboxControllerMakesPods(t *testing.T) {
	bin := buildAgentSandboxController(t)
	const ns = "agent-sandbox-live"
	ex := filepath.Join(the.repo, "examples", "sigs-agent-sandbox")
	out := filepath.Join(t.TempDir(), "out")
	keyhole(t, "render", "--target", render.TargetAgentSandbox, "--namespace", ns, "-o", out, inNamespace(t, ex, ns))

	cmd := exec.Command(bin, "--kubeconfig", the.kubeconfig, "--leader-elect=false", "--extensions",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd.Dir = the.dir
	cmd.SysProcAttr = procAttr()
	proc, err := e2ekube.Start("agent-sandbox-controller", filepath.Join(the.dir, "agent-sandbox-controller.log"), cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(10 * time.Second)
		if t.Failed() {
			if b, err := os.ReadFile(proc.Log); err == nil {
				lines := strings.Split(string(b), "\n")
				t.Logf("the controller's log, last lines:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
			}
		}
	})

	applyRendered(t, ex, out, "agent-sandbox")
	claim := fmt.Sprintf("apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxClaim\nmetadata: {name: session-1, namespace: %s}\nspec: {warmPoolRef: {name: aider-warmpool}}\n", ns)
	_, stderr := mustKubectl(t, []byte(claim), append(applyArgs, "-f", "-")...)
	noWarnings(t, stderr)

	// The warm pool's sandbox (replicas: 1) and the claim's: two pods,
	// however the claim got its sandbox.
	var pods []map[string]any
	deadline := time.Now().Add(90 * time.Second)
	for {
		pods = listItems(t, "pods", ns)
		if len(pods) >= 2 {
			break
		}
		select {
		case <-proc.Exited():
			t.Fatalf("the controller exited: %v", proc.Err())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller made %d pods in 90 s, want 2 (the warm pool's and the claim's)", len(pods))
		}
		time.Sleep(500 * time.Millisecond)
	}
	if n := len(listItems(t, "sandboxes.agents.x-k8s.io", ns)); n < 2 {
		t.Errorf("%d Sandboxes, want 2", n)
	}
	for _, pod := range pods {
		name, _ := dig(pod, "metadata", "name").(string)
		t.Run(name, func(t *testing.T) { checkSandboxPod(t, pod) })
	}

	// The NetworkPolicy the template controller writes from the
	// template's networkPolicy.
	var np map[string]any
	for time.Now().Before(deadline) {
		if items := listItems(t, "networkpolicies", ns); len(items) > 0 {
			np = items[0]
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if np == nil {
		t.Fatal("the controller wrote no NetworkPolicy for the template")
	}
	egress, err := yaml.Marshal(dig(np, "spec", "egress"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(egress), "6443") || !strings.Contains(string(egress), "port: 53") {
		t.Errorf("the template's NetworkPolicy lacks keyhole's egress rules:\n%s", egress)
	}
}

// checkSandboxPod checks one pod the controller made from the template.
func checkSandboxPod(t *testing.T, pod map[string]any) {
	spec, _ := dig(pod, "spec").(map[string]any)
	var inits []string
	for _, c := range asMaps(spec["initContainers"]) {
		inits = append(inits, c["name"].(string))
	}
	if !keyholeInitsFirst(inits, "git-clone") {
		t.Errorf("init containers %v, want keyhole's (the nat rules, the trust bundle, the proxy) and then git-clone", inits)
	}
	if spec["serviceAccountName"] != "aider-browser-egress-proxy" || spec["automountServiceAccountToken"] != false {
		t.Errorf("identity: serviceAccountName %v, automountServiceAccountToken %v", spec["serviceAccountName"], spec["automountServiceAccountToken"])
	}
	if dig(pod, "metadata", "annotations", "keyhole.dev/proxy-config-sha256") == nil {
		t.Error("the pod lost the proxy config hash annotation")
	}
	secretVolumes := map[string]string{}
	for _, v := range asMaps(spec["volumes"]) {
		if s, ok := dig(v, "secret", "secretName").(string); ok {
			secretVolumes[v["name"].(string)] = s
		}
	}
	for _, want := range []string{"llm-secrets", "github-token"} {
		found := false
		for _, s := range secretVolumes {
			found = found || s == want
		}
		if !found {
			t.Errorf("no volume of Secret %s for the proxy", want)
		}
	}
	for _, c := range slices.Concat(asMaps(spec["initContainers"]), asMaps(spec["containers"])) {
		name := c["name"].(string)
		for _, m := range asMaps(c["volumeMounts"]) {
			secret, ok := secretVolumes[m["name"].(string)]
			if !ok {
				continue
			}
			switch {
			case name == "egress-proxy":
			case (name == "egress-trust-publish" || name == "egress-trust-watch") && m["name"] == "egress-ca-public":
			default:
				t.Errorf("container %s mounts Secret %s", name, secret)
			}
		}
		for _, e := range asMaps(c["env"]) {
			if dig(e, "valueFrom", "secretKeyRef") != nil {
				t.Errorf("container %s reads %v from a Secret", name, e["name"])
			}
		}
		if c["envFrom"] != nil {
			t.Errorf("container %s has envFrom %v", name, c["envFrom"])
		}
		if name != "aider" && name != "git-clone" {
			continue
		}
		env := map[string]any{}
		for _, e := range asMaps(c["env"]) {
			env[e["name"].(string)] = e["value"]
		}
		if env["OPENAI_API_KEY"] != "omnia-injected-openai" || env["HTTPS_PROXY"] != "http://127.0.0.1:3128" || env["SSL_CERT_FILE"] != render.BundleFile {
			t.Errorf("container %s environment %v", name, env)
		}
	}
}

// buildAgentSandboxController runs scripts/agent-sandbox-controller.sh,
// which builds the controller once and prints its path.
func buildAgentSandboxController(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(the.repo, "scripts", "agent-sandbox-controller.sh"))
	cmd.Dir = the.repo
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/agent-sandbox-controller.sh could not build agent-sandbox's controller (%v); run it by hand to see why (it needs the Go module proxy)", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	p := lines[len(lines)-1]
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("scripts/agent-sandbox-controller.sh printed %q, which is not a file: %v", p, err)
	}
	return p
}

// inNamespace copies the example into a temporary directory with every
// object in ns, so this test's objects stand apart from the other tests'.
func inNamespace(t *testing.T, ex, ns string) string {
	t.Helper()
	dir := t.TempDir()
	entries, err := os.ReadDir(ex)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(ex, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.ReplaceAll(string(b), "namespace: default\n", "namespace: "+ns+"\n"))
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// listItems lists the objects of a resource in ns.
func listItems(t *testing.T, resource, ns string) []map[string]any {
	t.Helper()
	out, _ := mustKubectl(t, nil, "get", resource, "-n", ns, "-o", "yaml")
	var list map[string]any
	if err := yaml.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("decoding kubectl get %s: %v", resource, err)
	}
	return asMaps(list["items"])
}

func asMaps(v any) []map[string]any {
	l, _ := v.([]any)
	var out []map[string]any
	for _, x := range l {
		if m, ok := x.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
