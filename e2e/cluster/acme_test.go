//go:build e2e

package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/e2ekube"
)

// What the rendered github-acme example is called in the cluster.
const (
	acmeNS         = "agents"
	acmeSandbox    = "support-workspace-sandbox"
	acmeProxy      = "support-workspace-egress-proxy"
	acmeCASecret   = "support-workspace-egress-ca"
	acmeTrust      = "support-workspace-egress-trust"
	acmeSecret     = "acme-github-token"
	placeholder    = "omnia-injected-github-acme"
	upstreamCAName = "upstream-ca"
	refusalHeader  = "X-Omnia-Egress-Refused"
	// acmeImage is the example SandboxClass's image: the test's sandbox
	// image is tagged so in containerd, as a user's registry would serve it.
	acmeImage = "ghcr.io/acme/agent-workspace:1.4.2"
)

// TestGitHubAcme renders examples/github-acme as a user would (the proxy
// pointed at the fake GitHub with --proxy-resolve and
// --upstream-ca-configmap, nothing edited by hand), applies the rendered
// kustomization server-side, and then, from inside the running sandbox
// container, uses git, curl and Python requests through the proxy with
// only the placeholder; checks that nothing in the sandbox container holds
// the Secret; and rotates the Secret through the API. Both proxy modes,
// one after the other (they share the example's names).
func TestGitHubAcme(t *testing.T) {
	ctx := context.Background()
	c := the
	c.prepareRenders(t, ctx)
	token := "ghp_keyholeE2Ecanary" + randomSuffix(t)
	up, err := startUpstream(t.TempDir(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()
	can, err := startCanaries()
	if err != nil {
		t.Fatal(err)
	}
	defer can.close()
	by := c.startBystander(t, ctx)
	defer c.removeBystander(t, ctx)
	for _, mode := range []string{"sidecar", "deployment"} {
		t.Run(mode, func(t *testing.T) {
			up.setToken(token)
			dir := c.renderAcme(t, "--proxy-mode", mode)
			c.deployAcme(t, ctx, dir, up, token)
			defer c.removeAcme(t, ctx)
			c.waitAcme(t, ctx, mode)

			t.Run("trust bundle published", func(t *testing.T) {
				out, err := c.kubectl(ctx, nil, "get", "configmap", acmeTrust, "-n", acmeNS, "-o", "jsonpath={.data.bundle\\.pem}")
				if err != nil {
					t.Fatal(err)
				}
				caPEM, err := c.kubectl(ctx, nil, "get", "secret", acmeCASecret, "-n", acmeNS, "-o", "jsonpath={.data.ca\\.crt}")
				if err != nil {
					t.Fatal(err)
				}
				ca, _ := base64.StdEncoding.DecodeString(caPEM)
				if n := strings.Count(out, "BEGIN CERTIFICATE"); n < 50 || !strings.HasSuffix(out, string(ca)) {
					t.Errorf("bundle.pem holds %d certificates and ends with the CA: %v", n, strings.HasSuffix(out, string(ca)))
				}
				// The Java trust store and the wgetrc, published beside it
				// and mounted in the sandbox.
				p12, err := c.kubectl(ctx, nil, "get", "configmap", acmeTrust, "-n", acmeNS, "-o", "jsonpath={.binaryData.truststore\\.p12}")
				if err != nil || len(p12) < 1000 {
					t.Errorf("truststore.p12 not published (%d bytes of base64): %v", len(p12), err)
				}
				if out, err := c.sandboxSh(ctx, `cat "$WGETRC"; test -s /etc/keyhole/trust/truststore.p12 && echo p12-mounted`); err != nil ||
					!strings.Contains(out, "ca_certificate = /etc/keyhole/trust/bundle.pem") || !strings.Contains(out, "p12-mounted") {
					t.Errorf("the sandbox's trust directory: %q, %v", out, err)
				}
			})
			c.checkClients(t, ctx, up, mode)
			c.checkNoSecretInSandbox(t, ctx, token, mode)
			c.checkPodAttacks(t, ctx, mode, token, can)
			c.checkNetworkPolicy(t, ctx, mode, by)
			t.Run("rotation", func(t *testing.T) {
				before := c.proxyPod(t, ctx, mode)
				rotated := "ghp_keyholeE2Erotated" + randomSuffix(t)
				c.applySecret(t, ctx, rotated)
				up.setToken(rotated)
				code := waitSandbox(func(script string) (string, error) { return c.sandboxSh(ctx, script) },
					`curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $GH_TOKEN" https://api.github.com/repos/acme/widgets`, "200", 2*time.Minute)
				if code != "200" {
					t.Fatalf("after rotating the Secret the API answered %q for 2 minutes", code)
				}
				after := c.proxyPod(t, ctx, mode)
				if after != before {
					t.Errorf("the proxy pod changed (%s to %s): the rotation restarted it", before, after)
				}
				c.checkNoSecretInSandbox(t, ctx, rotated, mode)
			})
			t.Run("CA renewal", func(t *testing.T) { c.checkCARenewal(t, ctx, mode) })
			t.Run("no secret in cert-manager's log", func(t *testing.T) { c.checkCertManagerLog(t, ctx, token) })
		})
	}
}

// renderAcme runs `keyhole render` in process on the example, pointed
// at the fake GitHub, with the flags args adds.
func (c *cluster) renderAcme(t *testing.T, args ...string) string {
	t.Helper()
	return c.render(t, append(args,
		"--proxy-resolve", "github.com:443:"+upstreamAddr,
		"--proxy-resolve", "api.github.com:443:"+upstreamAddr,
		"--upstream-ca-configmap", upstreamCAName,
		filepath.Join(c.tools[repoRoot], "examples", "github-acme"),
	)...)
}

// prepareAcme creates what lives outside git: the namespace, the Secret
// and the upstream's CA. The sandbox's CA is cert-manager's to issue.
func (c *cluster) prepareAcme(t *testing.T, ctx context.Context, up *upstream, token string) {
	t.Helper()
	c.prepareNamespace(t, ctx, up.caPEM)
	c.applySecret(t, ctx, token)
}

// prepareNamespace creates the example's namespace and the ConfigMap of
// the CA the stand-in upstreams' certificates are signed by, which the
// render names with --upstream-ca-configmap.
func (c *cluster) prepareNamespace(t *testing.T, ctx context.Context, caPEM []byte) {
	t.Helper()
	if _, err := c.kubectl(ctx, nil, "create", "namespace", acmeNS); err != nil {
		t.Fatal(err)
	}
	cm := fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: %s, namespace: %s}
data:
  ca.crt: %q
`, upstreamCAName, acmeNS, caPEM)
	if _, err := c.kubectl(ctx, []byte(cm), "apply", "--server-side", "--field-manager=keyhole-e2e-setup", "-f", "-"); err != nil {
		t.Fatal(err)
	}
}

// deployAcme creates what lives outside git (prepareAcme), then applies
// the render (applyRender).
func (c *cluster) deployAcme(t *testing.T, ctx context.Context, dir string, up *upstream, token string) {
	t.Helper()
	c.prepareAcme(t, ctx, up, token)
	c.applyRender(t, ctx, dir)
}

// applyRender applies the render as a GitOps tool would: server-side,
// the kustomization whole. cert-manager then issues the rendered CA
// Certificate into <claim>-egress-ca, which the proxy signs its leaves
// with; until it has, the proxy's pod cannot start.
func (c *cluster) applyRender(t *testing.T, ctx context.Context, dir string) {
	t.Helper()
	if _, err := c.kubectl(ctx, nil, "apply", "--server-side", "--field-manager=keyhole-e2e", "-k", dir); err != nil {
		t.Fatal(err)
	}
	checkIssuedCA(t, c.waitCertificate(t, ctx, 1))
}

func (c *cluster) applySecret(t *testing.T, ctx context.Context, token string) {
	t.Helper()
	c.applySecretData(t, ctx, acmeNS, acmeSecret, map[string]string{"user": "x-access-token", "token": token})
}

// waitAcme waits for the rendered Deployments to be available and, in
// deployment mode, for the proxy's Service to be reachable from the
// sandbox (waitProxyService).
func (c *cluster) waitAcme(t *testing.T, ctx context.Context, mode string) {
	t.Helper()
	deps := []string{acmeSandbox}
	if mode == "deployment" {
		deps = []string{acmeProxy, acmeSandbox}
	}
	for _, d := range deps {
		if _, err := c.kubectl(ctx, nil, "rollout", "status", "-n", acmeNS, "deployment/"+d, "--timeout=300s"); err != nil {
			pods, _ := c.kubectl(ctx, nil, "describe", "pods", "-n", acmeNS)
			events, _ := c.kubectl(ctx, nil, "get", "events", "-n", acmeNS, "--sort-by=.lastTimestamp")
			logs, _ := c.kubectl(ctx, nil, "logs", "-n", acmeNS, "deployment/"+d, "--all-containers", "--tail=40")
			t.Fatalf("%v\n%s\n%s\n%s", err, pods, events, logs)
		}
	}
	if mode == "deployment" {
		c.waitProxyService(t, ctx)
	}
}

// proxyServiceTimeout bounds waitProxyService.
const proxyServiceTimeout = 2 * time.Minute

// proxyConnect opens a TCP connection from the sandbox container to the
// address its clients' HTTPS_PROXY names, and closes it: no request.
const proxyConnect = `python3 -c 'import os, socket, urllib.parse; u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"]); socket.create_connection((u.hostname, u.port), 5).close()'`

// waitProxyService waits until the deployment-mode sandbox's clients can
// reach the proxy's Service: its EndpointSlice lists an endpoint ready,
// and a TCP connection from the sandbox container to the address
// HTTPS_PROXY names is accepted. The end of a rollout says only that the
// pods are Ready in the API; the EndpointSlice controller, kube-proxy's
// rules for the Service and kube-router's for the two pods'
// NetworkPolicies follow it, each in its own time, and until they have, a
// connection to the Service is refused at once (kube-proxy rejects one to
// a Service with no ready endpoint; kube-router one its rules do not yet
// admit). Only that convergence is waited for, and the wait is logged:
// once the Service is reached, every check runs once, and a refusal then
// fails the check with what explain prints.
func (c *cluster) waitProxyService(t *testing.T, ctx context.Context) {
	t.Helper()
	start := time.Now()
	var last string
	for tries := 1; ; tries++ {
		ready, err := c.kubectl(ctx, nil, "get", "endpointslices", "-n", acmeNS, "-l", "kubernetes.io/service-name="+acmeProxy,
			"-o", `jsonpath={range .items[*].endpoints[*]}{.addresses[0]}={.conditions.ready} {end}`)
		switch {
		case err != nil:
			last = err.Error()
		case !strings.Contains(ready, "=true"):
			last = fmt.Sprintf("no endpoint of the Service is ready (%q)", ready)
		default:
			if _, err := c.sandboxSh(ctx, proxyConnect); err != nil {
				last = fmt.Sprintf("endpoints %q; the sandbox's connection to the Service: %v", ready, err)
				break
			}
			if tries > 1 {
				t.Logf("the proxy's Service took %s after the rollout to be reached from the sandbox (%d tries); before: %s",
					time.Since(start).Round(time.Second), tries, last)
			}
			return
		}
		if time.Since(start) > proxyServiceTimeout {
			t.Fatalf("the sandbox did not reach the proxy's Service within %s of the rollout: %s\n%s",
				proxyServiceTimeout, last, c.explain(ctx, acmeNS, nil))
		}
		time.Sleep(time.Second)
	}
}

// removeAcme deletes the namespace and waits until it is gone, so the
// next mode starts clean.
func (c *cluster) removeAcme(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := c.kubectl(ctx, nil, "delete", "namespace", acmeNS, "--wait=true", "--timeout=180s"); err != nil {
		t.Errorf("removing namespace %s: %v", acmeNS, err)
	}
}

// sandboxSh runs a shell script in the running sandbox container, as the
// agent's code would run, and returns its stdout.
func (c *cluster) sandboxSh(ctx context.Context, script string) (string, error) {
	return c.kubectl(ctx, nil, "exec", "-n", acmeNS, "deployment/"+acmeSandbox, "-c", "sandbox", "--", "/bin/sh", "-c", script)
}

// checkClients uses real clients in the sandbox container through the
// proxy, holding only the placeholder.
func (c *cluster) checkClients(t *testing.T, ctx context.Context, up *upstream, mode string) {
	head, err := up.head()
	if err != nil {
		t.Fatal(err)
	}
	tests := githubChecks(head, mode == "sidecar")
	tests["git clone without credentials"] = sandboxCheck{
		script: `rm -rf /tmp/widgets && git clone --quiet https://github.com/acme/widgets.git /tmp/widgets && cat /tmp/widgets/README.md && git -C /tmp/widgets rev-parse HEAD`,
		want:   []string{"widgets\n", head},
	}
	tests["Python requests trusts the bundle"] = sandboxCheck{
		script: `python3 -c 'import os, requests; r = requests.get("https://api.github.com/repos/acme/widgets", headers={"Authorization": "Bearer " + os.environ["GH_TOKEN"]}); print(r.status_code, os.environ["REQUESTS_CA_BUNDLE"])'`,
		want:   []string{"200 /etc/keyhole/trust/bundle.pem"},
	}
	if mode == "sidecar" {
		tests["curl ignoring the proxy to another host is refused"] = sandboxCheck{
			script: `curl --noproxy '*' -sS -o /dev/null -w '%{http_code}' --max-time 10 --resolve evil.example:443:192.0.2.10 https://evil.example/ 2>&1; echo " exit=$?"`,
			want:   []string{"alert access denied", "000 exit=35"},
		}
	}
	runSandboxChecks(t, func(script string) (string, error) { return c.sandboxSh(ctx, script) },
		func() string { return c.explain(ctx, acmeNS, up.requests()) }, []string{*up.token.Load()}, tests)
}

// checkNoSecretInSandbox prints everything the sandbox container can read
// that the pod mounted or set (every file under every mount but the
// image's root, /proc, /sys and /dev, and its environment) and requires
// the Secret's value to be in none of it. The value never enters the
// container: the search happens here.
func (c *cluster) checkNoSecretInSandbox(t *testing.T, ctx context.Context, token, mode string) {
	t.Run("no secret in the sandbox container", func(t *testing.T) {
		out, err := c.sandboxSh(ctx, sandboxListing(`cat /proc/1/environ | tr '\0' '\n'`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, token) {
			t.Errorf("the sandbox container can read the Secret's value")
		}
		for _, w := range append(sandboxListingWants, "GH_TOKEN="+placeholder) {
			if !strings.Contains(out, w) {
				t.Errorf("the sandbox container's listing lacks %q", w)
			}
		}
		// Every other container of the sandbox pod but the proxy mounts
		// no Secret but ca.crt of the CA (read from the pod spec: the
		// init container has exited).
		spec, err := c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS, "-l", "app.kubernetes.io/component=sandbox",
			"-o", `jsonpath={range .items[*].spec.initContainers[*]}{.name}={range .volumeMounts[*]}{.name},{end};{end}`)
		if err != nil {
			t.Fatal(err)
		}
		for _, entry := range strings.Split(strings.TrimSuffix(spec, ";"), ";") {
			name, mounts, _ := strings.Cut(entry, "=")
			if name == "" || name == "egress-proxy" {
				continue
			}
			if strings.Contains(mounts, "secret-"+acmeSecret) || strings.Contains(mounts, "egress-ca,") {
				t.Errorf("init container %s mounts %s", name, mounts)
			}
		}
		if mode == "deployment" {
			vols, err := c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS, "-l", "app.kubernetes.io/component=sandbox",
				"-o", `jsonpath={range .items[*].spec.volumes[*]}{.secret.secretName}{.projected.sources[*].secret.name}{end}`)
			if err != nil {
				t.Fatal(err)
			}
			if vols != "" {
				t.Errorf("the sandbox pod mounts Secrets %q in deployment mode", vols)
			}
		}
	})
}

// proxyPod names the pod the proxy runs in, with its UID and its
// containers' restart counts.
func (c *cluster) proxyPod(t *testing.T, ctx context.Context, mode string) string {
	t.Helper()
	comp := "sandbox"
	if mode == "deployment" {
		comp = "egress-proxy"
	}
	out, err := c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS, "-l", "app.kubernetes.io/component="+comp,
		"--field-selector=status.phase=Running",
		"-o", `jsonpath={range .items[*]}{.metadata.name}/{.metadata.uid}/restarts={range .status.initContainerStatuses[*]}{.restartCount}{end}{range .status.containerStatuses[*]}{.restartCount}{end}{end}`)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func randomSuffix(t *testing.T) string {
	t.Helper()
	tok, err := e2ekube.RandomToken()
	if err != nil {
		t.Fatal(err)
	}
	return tok[:16]
}
