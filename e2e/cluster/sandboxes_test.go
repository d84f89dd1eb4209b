//go:build e2e

package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/cli"
	"keyhole.dev/keyhole/internal/e2ekube"
)

// What the tests that render a sandbox and use it from inside share: the
// render itself, the Secrets they create, the scripts run in the sandbox
// container and what their output must and must not hold.

// render runs `keyhole render -o DIR ARGS...` in process, as a user
// would, and returns DIR.
func (c *cluster) render(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rendered")
	args = append([]string{"render", "-o", dir}, args...)
	var stdout, stderr bytes.Buffer
	if code := cli.Main(args, &stdout, &stderr); code != 0 {
		t.Fatalf("keyhole %s: exit %d\n%s", strings.Join(args, " "), code, stderr.String())
	}
	return dir
}

// applySecretData creates or replaces the Secret name in ns with data,
// as a user's kubectl or a controller outside git would.
func (c *cluster) applySecretData(t *testing.T, ctx context.Context, ns, name string, data map[string]string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\ntype: Opaque\ndata:\n", name, ns)
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %s: %s\n", k, base64.StdEncoding.EncodeToString([]byte(data[k])))
	}
	if _, err := c.kubectl(ctx, []byte(b.String()), "apply", "--server-side", "--field-manager=keyhole-e2e-setup", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// sandboxCheck is a script run in the sandbox container and what its
// stdout must hold.
type sandboxCheck struct {
	script string
	want   []string // substrings of stdout
}

// runSandboxChecks runs each check once with sh, the sandbox container's
// shell, and requires its output to hold every want and none of
// secrets; explain says, for a failure, what the stand-in upstream
// received and the state of the cluster (c.explain).
func runSandboxChecks(t *testing.T, sh func(string) (string, error), explain func() string, secrets []string, checks map[string]sandboxCheck) {
	for name, tc := range checks {
		t.Run(name, func(t *testing.T) {
			out, err := sh(tc.script)
			if err != nil {
				t.Fatalf("%v\n%s", err, explain())
			}
			for _, s := range secrets {
				if strings.Contains(out, s) {
					t.Fatal("the sandbox container printed a secret value")
				}
			}
			for _, w := range tc.want {
				if !holds(out, w) {
					t.Errorf("output lacks %q:\n%s\n%s", w, out, explain())
				}
			}
		})
	}
}

// explain says what a failed check in namespace ns needs to be understood
// without another run, saw being what the stand-in upstream received (nil:
// not said): each
// pod's conditions and since when, its containers' readiness, restarts and
// last end; the EndpointSlices; the namespace's events (a probe that
// failed, a container killed); the packet filter's REJECT rules that have
// matched a packet (kube-proxy's for a Service with no ready endpoint,
// kube-router's for a NetworkPolicy); and the end of kube-proxy's and
// kube-router's logs. None of it holds a Secret's value.
func (c *cluster) explain(ctx context.Context, ns string, saw []string) string {
	var b strings.Builder
	if saw != nil {
		fmt.Fprintf(&b, "upstream saw: %q\n", saw)
	}
	section := func(title, out string, err error) {
		fmt.Fprintf(&b, "---- %s ----\n", title)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
		}
		if out = strings.TrimRight(out, "\n"); out != "" {
			b.WriteString(out + "\n")
		}
	}
	out, err := c.kubectl(ctx, nil, "get", "pods", "-n", ns, "-o", `jsonpath={range .items[*]}{.metadata.name}{range .status.conditions[*]} {.type}={.status}@{.lastTransitionTime}{end}`+
		`{range .status.initContainerStatuses[*]}{"\n  "}{.name}: ready={.ready} restarts={.restartCount} last={.lastState.terminated.reason}@{.lastState.terminated.finishedAt}{end}`+
		`{range .status.containerStatuses[*]}{"\n  "}{.name}: ready={.ready} restarts={.restartCount} last={.lastState.terminated.reason}@{.lastState.terminated.finishedAt}{end}{"\n"}{end}`)
	section("pods in "+ns, out, err)
	out, err = c.kubectl(ctx, nil, "get", "endpointslices", "-n", ns, "-o",
		`jsonpath={range .items[*]}{.metadata.name}:{range .endpoints[*]} {.addresses[0]} ready={.conditions.ready} serving={.conditions.serving} terminating={.conditions.terminating}{end}{"\n"}{end}`)
	section("endpoint slices in "+ns, out, err)
	out, err = c.kubectl(ctx, nil, "get", "events", "-n", ns, "--sort-by=.lastTimestamp")
	section("events in "+ns, out, err)
	out, err = c.rejectsMatched(ctx)
	section("REJECT rules that matched a packet ([packets:bytes])", out, err)
	for _, p := range c.procs {
		if p.Name == toolKubeProxy || p.Name == toolKubeRouter {
			section("the end of "+p.Name+"'s log", e2ekube.Tail(p.Log, 20), nil)
		}
	}
	return b.String()
}

// rejectsMatched lists the filter table's REJECT rules whose counters
// are not zero.
func (c *cluster) rejectsMatched(ctx context.Context) (string, error) {
	save := filepath.Join(filepath.Dir(c.tools[toolIptables]), "iptables-save")
	out, err := exec.CommandContext(ctx, save, "-c", "-t", "filter").Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", save, err)
	}
	var b strings.Builder
	for line := range strings.Lines(string(out)) {
		if strings.Contains(line, "-j REJECT") && !strings.HasPrefix(line, "[0:0]") {
			b.WriteString(line)
		}
	}
	return b.String(), nil
}

// holds reports whether out holds want; a want that is a header line
// ("Name: value") matches whatever the case of the name, as curl prints
// names as the server sent them and HTTP/2 sends them in lower case.
func holds(out, want string) bool {
	if strings.Contains(out, want) {
		return true
	}
	name, value, ok := strings.Cut(want, ": ")
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return false
	}
	for line := range strings.Lines(out) {
		n, v, ok := strings.Cut(strings.TrimRight(line, "\r\n"), ":")
		if ok && strings.EqualFold(n, name) && strings.Contains(v, value) {
			return true
		}
	}
	return false
}

// githubChecks are the uses of the fake GitHub that every render of
// examples/github-acme must serve from its sandbox container with only
// the placeholder: git and curl with the token injected, a path no rule
// allows refused, and a client that ignores HTTPS_PROXY carried by the
// transparent listener (the sidecar pod's, and agent-sandbox's).
func githubChecks(head string, transparent bool) map[string]sandboxCheck {
	checks := map[string]sandboxCheck{
		"git ls-remote with the placeholder": {
			script: `git ls-remote https://x-access-token:$GH_TOKEN@github.com/acme/widgets.git`,
			want:   []string{head + "\trefs/heads/main"},
		},
		"curl to an allowed path gets the token injected": {
			script: `curl -sS -w ' %{http_code}' -H "Authorization: Bearer $GH_TOKEN" https://api.github.com/repos/acme/widgets`,
			want:   []string{`"full_name":"acme/widgets"`, " 200"},
		},
		"curl to a refused path": {
			script: `curl -sS -o /dev/null -D - https://api.github.com/user`,
			want:   []string{" 403", refusalHeader + ": l7-not-allowed"},
		},
		"the sandbox holds the placeholder": {
			script: `echo "$GH_TOKEN"`,
			want:   []string{placeholder},
		},
	}
	if transparent {
		// A client that ignores HTTPS_PROXY, aimed at an address of its
		// choosing (TEST-NET-1), is redirected to the proxy, which dials
		// the name it allows and refuses the rest.
		checks["curl ignoring the proxy is carried by the transparent listener"] = sandboxCheck{
			script: `curl --noproxy '*' -sS -w ' %{http_code}' --resolve api.github.com:443:192.0.2.10 https://api.github.com/repos/acme/widgets`,
			want:   []string{`"full_name":"acme/widgets"`, " 200"},
		}
	}
	return checks
}

// sandboxListing prints everything the sandbox container can read that
// the pod mounted or set: its environment, then every file under every
// mount but the image's root, /proc, /sys and /dev, then whether a
// service account token or the proxy's secrets directory is there. The
// search for a value happens outside, so the value never enters the
// container. extra runs after env (what else to print).
func sandboxListing(extra string) string {
	return `set -e
env
` + extra + `
awk '{print $2}' /proc/self/mounts | sort -u | while read -r m; do
  case "$m" in /|/proc|/proc/*|/sys|/sys/*|/dev|/dev/*) continue ;; esac
  echo "== mount $m"
  find "$m" -xdev -type f -size -1024k -exec cat {} + 2>/dev/null || true
done
test ! -e /var/run/secrets/kubernetes.io/serviceaccount/token && echo "no service account token"
test ! -e /var/run/keyhole/secrets && echo "no proxy secrets directory"
`
}

// sandboxListingWants is what every sandbox container's listing holds:
// the mounted trust bundle, and neither a token nor the proxy's secrets.
var sandboxListingWants = []string{"== mount /etc/keyhole/trust", "BEGIN CERTIFICATE", "no service account token", "no proxy secrets directory"}

// waitSandbox runs script in the sandbox container every 2 seconds until
// its output is want or timeout passes, and returns the last output.
func waitSandbox(sh func(string) (string, error), script, want string, timeout time.Duration) string {
	deadline := time.Now().Add(timeout)
	var got string
	for {
		got, _ = sh(script)
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(2 * time.Second)
	}
}
