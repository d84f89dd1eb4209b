//go:build e2e

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"keyhole.dev/keyhole/cli"
	"keyhole.dev/keyhole/internal/e2ekube"
)

// What Flux's objects are called in the cluster: those of examples/flux.
const (
	fluxNS            = "flux-system"
	fluxGitRepository = "agents-config"
	fluxKustomization = "agents"
	fluxAuthSecret    = "agents-config-auth"
	// fluxRepo is the configuration repository on the fake GitHub.
	fluxRepo = "acme/agents-config.git"
	// The controllers' addresses, on the loopback of the test's network
	// namespace, where nothing else listens. The source-controller serves
	// its artifacts on fluxStorage and the kustomize-controller fetches
	// them there.
	fluxStorage      = "127.0.0.1:9790"
	fluxSourceHealth = "127.0.0.1:9791"
	fluxKustHealth   = "127.0.0.1:9792"
	// fluxTimeout bounds one reconciliation: a fetch, an apply and, with
	// the example's wait: true, the rollout it starts.
	fluxTimeout = 5 * time.Minute
)

// TestFluxLoop runs the GitOps loop examples/flux documents, with Flux's
// own source-controller and kustomize-controller: a configuration
// repository on the fake GitHub (the real git http-backend behind TLS and
// Basic auth) holds the inputs of examples/github-acme in agents/; what
// its CI workflow does (render with `keyhole render -o rendered`, commit
// rendered/ when it changed, push) is done here with the same command;
// and Flux applies ./rendered with the example's GitRepository and
// Kustomization (prune: true, wait: true). Every verdict is taken from
// inside the running sandbox container.
func TestFluxLoop(t *testing.T) {
	ctx := context.Background()
	c := the
	c.prepareRenders(t, ctx)
	if err := c.startFlux(ctx); err != nil {
		t.Fatal(err)
	}
	// Each proxy mode runs the whole loop on a cluster left clean by the
	// one before. In both, a changed rule must not restart the sandbox's
	// pod, the agent's running workspace: the sidecar proxy reloads its
	// config in place; the proxy in its own Deployment rolls, as its pod
	// template holds the config's hash.
	for _, mode := range []string{"sidecar", "deployment"} {
		t.Run(mode, func(t *testing.T) { c.fluxLoop(t, ctx, mode) })
	}
}

// fluxLoop is TestFluxLoop in one proxy mode.
func (c *cluster) fluxLoop(t *testing.T, ctx context.Context, fluxMode string) {
	token := "ghp_keyholeE2Eflux" + randomSuffix(t)
	up, err := startUpstream(t.TempDir(), token)
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()
	repo, err := up.newConfigRepo(t.TempDir(), fluxRepo)
	if err != nil {
		t.Fatal(err)
	}
	c.prepareAcme(t, ctx, up, token)
	defer c.removeAcme(t, ctx)

	// The repository's first state: the example's inputs, rendered by CI.
	if err := os.CopyFS(filepath.Join(repo.work, "agents"), os.DirFS(filepath.Join(c.tools[repoRoot], "examples", "github-acme"))); err != nil {
		t.Fatal(err)
	}
	repo.commitAndPush(t, "agents: the github-acme example")
	if ok, stderr := c.ciRender(t, repo, fluxMode); !ok {
		t.Fatalf("CI's render of the example failed:\n%s", stderr)
	}
	c.installFluxObjects(t, ctx, up, token)
	defer c.removeFluxObjects(t, ctx)
	first := repo.head(t)
	firstInputs := repo.rev(t, first+":agents")
	firstRender := repo.rev(t, first+":rendered")

	// Each step below depends on the state the one before left, so a
	// failure stops the loop.
	ok := t.Run("push, reconcile, rollout", func(t *testing.T) {
		c.reconcile(t, ctx, first)
		c.waitAcme(t, ctx, fluxMode)
		checkIssuedCA(t, c.waitCertificate(t, ctx, 1)) // cert-manager issued the CA Flux applied
		c.checkVerdicts(t, ctx, map[string]string{"/repos/acme/widgets": "200", "/user": "403 l7-not-allowed"})
		// Flux applied them, not the test: its labels and its field
		// manager are on the Deployment.
		out, err := c.kubectl(ctx, nil, "get", "deployment", acmeSandbox, "-n", acmeNS, "--show-managed-fields",
			"-o", `jsonpath={.metadata.labels.kustomize\.toolkit\.fluxcd\.io/name}/{.metadata.labels.kustomize\.toolkit\.fluxcd\.io/namespace} {.metadata.managedFields[*].manager}`)
		if err != nil {
			t.Fatal(err)
		}
		labels, managers, _ := strings.Cut(out, " ")
		if want := fluxKustomization + "/" + fluxNS; labels != want {
			t.Errorf("the sandbox Deployment's Flux labels are %q, want %q", labels, want)
		}
		if m := strings.Fields(managers); !slices.Contains(m, "kustomize-controller") || slices.Contains(m, "keyhole-e2e") {
			t.Errorf("the sandbox Deployment's field managers are %q, want kustomize-controller's and never the test's", m)
		}
		// The source-controller fetched the repository from the fake
		// GitHub, authenticated.
		if !slices.Contains(up.requests(), "github.com GET /"+fluxRepo+"/info/refs") {
			t.Errorf("the git server saw no fetch of %s: %q", fluxRepo, up.requests())
		}
	})
	if !ok {
		return
	}

	ok = t.Run("a widened rule is served without restarting the sandbox", func(t *testing.T) {
		before := c.sandboxPodIdentity(t, ctx)
		proxyBefore := c.proxyPod(t, ctx, fluxMode)
		repo.edit(t, "agents/connection.yaml", "pathPrefixes: [/repos/acme/widgets]\n", "pathPrefixes: [/repos/acme/widgets, /user]\n")
		repo.commitAndPush(t, "agents: github-acme may read /user")
		if ok, stderr := c.ciRender(t, repo, fluxMode); !ok {
			t.Fatalf("CI's render failed:\n%s", stderr)
		}
		c.reconcile(t, ctx, repo.head(t))
		c.waitVerdict(t, ctx, "/user", "200")
		c.checkVerdicts(t, ctx, map[string]string{"/repos/acme/widgets": "200"})
		if after := c.sandboxPodIdentity(t, ctx); after != before {
			t.Errorf("the sandbox pod changed from %s to %s: the widened rule restarted it", before, after)
		}
		if fluxMode == "sidecar" {
			// The sidecar proxy read its new config in place: the pod,
			// and every container's restart count, are unchanged.
			if after := c.proxyPod(t, ctx, fluxMode); after != proxyBefore {
				t.Errorf("the sandbox pod with its proxy went from %s to %s: the config was not reloaded in place", proxyBefore, after)
			}
			return
		}
		// The proxy's pod template holds the config's hash
		// (docs/render.md), so the proxy Deployment rolled; Flux waited
		// for it (wait: true).
		c.waitOnePod(t, ctx, "egress-proxy")
		if after := c.proxyPod(t, ctx, fluxMode); after == proxyBefore {
			t.Errorf("the proxy pod %s did not roll with its changed config", after)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("a broken Connection is never rendered, so nothing is pruned", func(t *testing.T) {
		before := c.sandboxPodIdentity(t, ctx)
		proxyBefore := c.proxyPod(t, ctx, fluxMode)
		inventory := c.fluxInventory(t, ctx)
		renderBefore := repo.rev(t, "HEAD:rendered")
		repo.edit(t, "agents/connection.yaml", `value: "Bearer {{ .token }}"`, `value: "Bearer {{ .tokn }}"`)
		repo.commitAndPush(t, "agents: a typo in the header template")
		ok, stderr := c.ciRender(t, repo, fluxMode)
		if ok {
			t.Fatal("CI's render of a broken Connection succeeded")
		}
		if !strings.Contains(stderr, "ConnectionSecretKeyMissing") {
			t.Errorf("the render's diagnostics do not name ConnectionSecretKeyMissing:\n%s", stderr)
		}
		if status := repo.git(t, "status", "--porcelain", "--", "rendered"); status != "" {
			t.Errorf("the failed render changed rendered/:\n%s", status)
		}
		// The user's commit is on main; Flux applies it, and with it the
		// last good render, unchanged.
		head := repo.head(t)
		if got := repo.rev(t, head+":rendered"); got != renderBefore {
			t.Fatalf("rendered/ changed from %s to %s", renderBefore, got)
		}
		c.reconcile(t, ctx, head)
		if got := c.fluxInventory(t, ctx); got != inventory {
			t.Errorf("Flux's inventory changed:\nbefore: %s\nafter:  %s", inventory, got)
		}
		c.checkVerdicts(t, ctx, map[string]string{"/repos/acme/widgets": "200", "/user": "200"})
		if after := c.sandboxPodIdentity(t, ctx); after != before {
			t.Errorf("the sandbox pod changed from %s to %s", before, after)
		}
		if after := c.proxyPod(t, ctx, fluxMode); after != proxyBefore {
			t.Errorf("the proxy pod changed from %s to %s", proxyBefore, after)
		}
		// An input with nothing to render is refused too: keyhole never
		// writes an empty render for CI to commit.
		empty := t.TempDir()
		var out, errb bytes.Buffer
		if code := cli.Main([]string{"render", "-o", filepath.Join(repo.work, "rendered"), empty}, &out, &errb); code == 0 {
			t.Errorf("rendering an input with no sandbox succeeded:\n%s", out.String())
		}
		if status := repo.git(t, "status", "--porcelain", "--", "rendered"); status != "" {
			t.Errorf("the refused empty render changed rendered/:\n%s", status)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("an empty rendered tree committed by hand is pruned", func(t *testing.T) {
		// What keyhole never writes, committed past it: Flux applies an
		// empty kustomization, and prune: true deletes everything the
		// last one applied.
		if err := os.WriteFile(filepath.Join(repo.work, "rendered", "kustomization.yaml"),
			[]byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		repo.commitAndPush(t, "rendered: emptied by hand")
		c.reconcile(t, ctx, repo.head(t))
		if got := c.fluxInventory(t, ctx); got != "" {
			t.Errorf("Flux's inventory after an empty render: %s", got)
		}
		c.waitGone(t, ctx, "deployment/"+acmeSandbox)
		c.waitGone(t, ctx, "configmap/"+acmeProxy)
		c.waitGone(t, ctx, "networkpolicy/"+acmeSandbox)
		if fluxMode == "deployment" {
			c.waitGone(t, ctx, "deployment/"+acmeProxy)
			c.waitGone(t, ctx, "service/"+acmeProxy)
		}
	})
	if !ok {
		return
	}

	t.Run("revert restores the first state", func(t *testing.T) {
		repo.git(t, "checkout", first, "--", "agents")
		repo.commitAndPush(t, "agents: revert to the example")
		if got := repo.rev(t, "HEAD:agents"); got != firstInputs {
			t.Fatalf("the reverted inputs are tree %s, want %s", got, firstInputs)
		}
		if ok, stderr := c.ciRender(t, repo, fluxMode); !ok {
			t.Fatalf("CI's render failed:\n%s", stderr)
		}
		head := repo.head(t)
		// Same inputs, same bytes: the render is the first one again.
		if got := repo.rev(t, head+":rendered"); got != firstRender {
			t.Errorf("the render of the reverted inputs is tree %s, the first was %s", got, firstRender)
		}
		c.reconcile(t, ctx, head)
		c.waitAcme(t, ctx, fluxMode)
		c.checkVerdicts(t, ctx, map[string]string{"/repos/acme/widgets": "200", "/user": "403 l7-not-allowed"})
	})

	t.Run("no secret in Flux's logs or the repository", func(t *testing.T) {
		for _, name := range []string{toolSourceCtl, toolKustomCtl} {
			b, err := os.ReadFile(c.path("logs", name+".log"))
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte(token)) {
				t.Errorf("%s's log holds the Secret's value", name)
			}
		}
		if all := repo.git(t, "log", "--all", "-p"); strings.Contains(all, token) {
			t.Error("the configuration repository holds the Secret's value")
		}
	})
}

// startFlux installs Flux's CRDs (testdata/flux-crds, verbatim from the
// controllers' modules) and starts the source-controller and the
// kustomize-controller as the other control-plane pieces run: processes
// in the test's namespaces, with the admin's kubeconfig, no leader
// election and no notification controller. github.com names the node in
// the test's mount namespace's /etc/hosts, as the source-controller must
// reach the fake GitHub by the name its certificate holds.
func (c *cluster) startFlux(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(c.tools[repoRoot], "e2e", "cluster", "testdata", "flux-crds", "*.yaml"))
	if err != nil || len(files) != 7 {
		return fmt.Errorf("want Flux's 7 CRDs in e2e/cluster/testdata/flux-crds, found %d (%v)", len(files), err)
	}
	if err := c.applyCRDs(ctx, files); err != nil {
		return err
	}
	if _, err := c.kubectl(ctx, nil, "create", "namespace", fluxNS); err != nil {
		return err
	}
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return err
	}
	hosts = append(hosts, []byte("\n"+nodeIP+" github.com api.github.com\n")...)
	if err := os.WriteFile(c.path("hosts"), hosts, 0o644); err != nil {
		return err
	}
	if err := syscall.Mount(c.path("hosts"), "/etc/hosts", "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting the test's /etc/hosts: %w", err)
	}
	if err := os.MkdirAll(c.path("flux", "storage"), 0o700); err != nil {
		return err
	}
	env := []string{"KUBECONFIG=" + c.kubeconfig, "RUNTIME_NAMESPACE=" + fluxNS}
	src, err := c.runEnv(toolSourceCtl, env, c.tools[toolSourceCtl],
		"--storage-path="+c.path("flux", "storage"),
		"--storage-addr="+fluxStorage,
		"--storage-adv-addr="+fluxStorage,
		"--metrics-addr=0",
		"--health-addr="+fluxSourceHealth,
		"--enable-leader-election=false",
		"--log-level=info",
	)
	if err != nil {
		return err
	}
	kust, err := c.runEnv(toolKustomCtl, env, c.tools[toolKustomCtl],
		"--metrics-addr=0",
		"--health-addr="+fluxKustHealth,
		"--enable-leader-election=false",
		"--no-remote-bases=true",
		"--log-level=info",
	)
	if err != nil {
		return err
	}
	for _, w := range []struct {
		p    *e2ekube.Proc
		addr string
	}{{src, fluxSourceHealth}, {kust, fluxKustHealth}} {
		if err := e2ekube.WaitReady(ctx, w.p, readyTimeout, 60, func(ctx context.Context) bool {
			return e2ekube.Get(ctx, http.DefaultClient, "http://"+w.addr+"/readyz", "") == http.StatusOK
		}); err != nil {
			return err
		}
	}
	return nil
}

// installFluxObjects applies examples/flux's GitRepository and
// Kustomization as published, the GitRepository given the credentials
// (Basic auth and the fake GitHub's CA) it needs here.
func (c *cluster) installFluxObjects(t *testing.T, ctx context.Context, up *upstream, token string) {
	t.Helper()
	c.applySecretData(t, ctx, fluxNS, fluxAuthSecret, map[string]string{"username": "x-access-token", "password": token, "ca.crt": string(up.caPEM)})
	example := filepath.Join(c.tools[repoRoot], "examples", "flux")
	gitrepo, err := c.kubectl(ctx, nil, "patch", "--local", "-o", "yaml", "-f", filepath.Join(example, "flux", "gitrepository.yaml"),
		"--type=merge", "-p", fmt.Sprintf(`{"spec":{"secretRef":{"name":%q}}}`, fluxAuthSecret))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubectl(ctx, []byte(gitrepo), "apply", "--server-side", "--field-manager=keyhole-e2e", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubectl(ctx, nil, "apply", "--server-side", "--field-manager=keyhole-e2e", "-f", filepath.Join(example, "flux", "agents.yaml")); err != nil {
		t.Fatal(err)
	}
}

// removeFluxObjects deletes the Kustomization (which, with prune: true,
// deletes what it applied) and the GitRepository.
func (c *cluster) removeFluxObjects(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, obj := range []string{"kustomization/" + fluxKustomization, "gitrepository/" + fluxGitRepository} {
		if _, err := c.kubectl(ctx, nil, "delete", "-n", fluxNS, obj, "--wait=true", "--timeout=120s"); err != nil {
			t.Errorf("removing %s: %v", obj, err)
		}
	}
}

// ciRender does what examples/flux/render-workflow.yaml does after a
// push: render agents/ into rendered/ (in process, with the flags that
// point the proxy at the fake GitHub) and, when that changed rendered/,
// commit and push it. It reports whether the render succeeded, and its
// diagnostics.
func (c *cluster) ciRender(t *testing.T, r *configRepo, fluxMode string) (bool, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := []string{
		"render", filepath.Join(r.work, "agents"), "-o", filepath.Join(r.work, "rendered"), "--format", "github",
		"--proxy-mode", fluxMode,
		"--proxy-resolve", "github.com:443:" + upstreamAddr,
		"--proxy-resolve", "api.github.com:443:" + upstreamAddr,
		"--upstream-ca-configmap", upstreamCAName,
	}
	if code := cli.Main(args, &stdout, &stderr); code != 0 {
		return false, stdout.String() + stderr.String()
	}
	r.git(t, "add", "--all", "rendered")
	if r.git(t, "status", "--porcelain", "--", "rendered") == "" {
		return true, stderr.String()
	}
	r.git(t, "commit", "--quiet", "-m", "render: "+r.git(t, "rev-parse", "--short", "HEAD"))
	r.git(t, "push", "--quiet", "origin", "main")
	return true, stderr.String()
}

// reconcile asks Flux to fetch the repository now (what `flux reconcile
// source git` does: the requestedAt annotation) and waits until the
// Kustomization has applied commit rev and is Ready, which with wait:
// true means the rollout it started finished.
func (c *cluster) reconcile(t *testing.T, ctx context.Context, rev string) {
	t.Helper()
	if _, err := c.kubectl(ctx, nil, "annotate", "--overwrite", "-n", fluxNS, "gitrepository/"+fluxGitRepository,
		"reconcile.fluxcd.io/requestedAt="+time.Now().Format(time.RFC3339Nano)); err != nil {
		t.Fatal(err)
	}
	want := "main@sha1:" + rev
	deadline := time.Now().Add(fluxTimeout)
	var last string
	for time.Now().Before(deadline) {
		out, err := c.kubectl(ctx, nil, "get", "kustomization", fluxKustomization, "-n", fluxNS,
			"-o", `jsonpath={.status.lastAppliedRevision} {.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
		if err == nil && strings.HasPrefix(out, want+" True ") {
			return
		}
		last = out
		time.Sleep(2 * time.Second)
	}
	src, _ := c.kubectl(ctx, nil, "get", "gitrepository", fluxGitRepository, "-n", fluxNS, "-o", "yaml")
	t.Fatalf("Flux did not apply %s within %s; the Kustomization says %q\n%s\n%s\n%s", want, fluxTimeout, last, src,
		e2ekube.Tail(c.path("logs", toolSourceCtl+".log"), 20), e2ekube.Tail(c.path("logs", toolKustomCtl+".log"), 20))
}

// fluxInventory is what the Kustomization last applied, as Flux records
// it for pruning.
func (c *cluster) fluxInventory(t *testing.T, ctx context.Context) string {
	t.Helper()
	out, err := c.kubectl(ctx, nil, "get", "kustomization", fluxKustomization, "-n", fluxNS, "-o", `jsonpath={.status.inventory.entries[*].id}`)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitGone waits until the object is deleted.
func (c *cluster) waitGone(t *testing.T, ctx context.Context, obj string) {
	t.Helper()
	if _, err := c.kubectl(ctx, nil, "wait", "--for=delete", "-n", acmeNS, obj, "--timeout=120s"); err != nil {
		t.Errorf("%s was not deleted: %v", obj, err)
	}
}

// waitOnePod waits until a component has one pod, the one a rollout
// left, its predecessor gone.
func (c *cluster) waitOnePod(t *testing.T, ctx context.Context, comp string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var out string
	for time.Now().Before(deadline) {
		var err error
		out, err = c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS, "-l", "app.kubernetes.io/component="+comp, "-o", "jsonpath={.items[*].metadata.name}")
		if err == nil && len(strings.Fields(out)) == 1 {
			return
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("the %s pods are %q after 2 minutes, want one", comp, out)
}

// sandboxPodIdentity names the running sandbox pod by UID, with its
// containers' restart counts.
func (c *cluster) sandboxPodIdentity(t *testing.T, ctx context.Context) string {
	t.Helper()
	out, err := c.kubectl(ctx, nil, "get", "pods", "-n", acmeNS, "-l", "app.kubernetes.io/component=sandbox",
		"--field-selector=status.phase=Running",
		"-o", `jsonpath={range .items[*]}{.metadata.uid}/{range .status.initContainerStatuses[*]}{.restartCount}{end}{range .status.containerStatuses[*]}{.restartCount}{end} {end}`)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out, " ") != 1 {
		t.Fatalf("want one running sandbox pod, have %q", out)
	}
	return out
}

// verdict is the status of a GET of api.github.com/PATH from the sandbox
// container with only the placeholder, followed by the proxy's refusal
// reason when there is one ("200", "403 l7-not-allowed"). The fake API
// answers 200 only to the real token, so a 200 means the proxy injected it.
func (c *cluster) verdict(ctx context.Context, path string) (string, error) {
	out, err := c.sandboxSh(ctx, `curl -sS --suppress-connect-headers -o /dev/null -D - -H "Authorization: Bearer $GH_TOKEN" https://api.github.com`+path)
	if err != nil {
		return "", err
	}
	var code, reason string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if f := strings.Fields(line); len(f) >= 2 && strings.HasPrefix(f[0], "HTTP/") {
			code, reason = f[1], "" // the last response is the one that counts
		}
		if v, ok := strings.CutPrefix(strings.ToLower(line), strings.ToLower(refusalHeader)+":"); ok {
			reason = " " + strings.TrimSpace(v)
		}
	}
	return code + reason, nil
}

func (c *cluster) checkVerdicts(t *testing.T, ctx context.Context, want map[string]string) {
	t.Helper()
	for path, w := range want {
		got, err := c.verdict(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		if got != w {
			t.Errorf("GET https://api.github.com%s from the sandbox: %q, want %q", path, got, w)
		}
	}
}

// waitVerdict waits up to two minutes for a verdict the proxy gives once
// it has re-read its config.
func (c *cluster) waitVerdict(t *testing.T, ctx context.Context, path, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	var got string
	for time.Now().Before(deadline) {
		got, _ = c.verdict(ctx, path)
		if got == want {
			return
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("GET https://api.github.com%s from the sandbox: %q for 2 minutes, want %q", path, got, want)
}

// configRepo is the configuration repository: a bare repository the fake
// GitHub serves, and the working copy the user and CI commit in and push
// from.
type configRepo struct {
	work string
	env  []string
}

// newConfigRepo makes the bare repository NAME on the fake GitHub and a
// clone of it to commit in.
func (u *upstream) newConfigRepo(dir, name string) (*configRepo, error) {
	home := filepath.Join(dir, "home")
	r := &configRepo{work: filepath.Join(dir, "work"), env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Acme", "GIT_AUTHOR_EMAIL=dev@acme.invalid",
		"GIT_COMMITTER_NAME=Acme", "GIT_COMMITTER_EMAIL=dev@acme.invalid",
	}}
	bare := filepath.Join(u.root, name)
	for _, d := range []string{home, r.work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for _, step := range [][]string{
		{"init", "--quiet", "--bare", "-b", "main", bare},
		{"-C", r.work, "init", "--quiet", "-b", "main"},
		{"-C", r.work, "remote", "add", "origin", bare},
	} {
		cmd := exec.Command("git", step...)
		cmd.Env = r.env
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("git %s: %w: %s", strings.Join(step, " "), err, out)
		}
	}
	return r, nil
}

func (r *configRepo) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", r.work}, args...)...)
	cmd.Env = r.env
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return strings.TrimSpace(string(out))
}

func (r *configRepo) head(t *testing.T) string { t.Helper(); return r.git(t, "rev-parse", "HEAD") }

func (r *configRepo) rev(t *testing.T, spec string) string {
	t.Helper()
	return r.git(t, "rev-parse", spec)
}

// commitAndPush commits every change in the working copy and pushes main:
// the user's push of agents/, or, in one subtest, a rendered/ edited by
// hand, which keyhole never writes. CI's own commits are ciRender's.
func (r *configRepo) commitAndPush(t *testing.T, msg string) {
	t.Helper()
	r.git(t, "add", "--all")
	r.git(t, "commit", "--quiet", "-m", msg)
	r.git(t, "push", "--quiet", "origin", "main")
}

// edit replaces old with new in the working copy's file, once; old must
// be there.
func (r *configRepo) edit(t *testing.T, file, old, new string) {
	t.Helper()
	p := filepath.Join(r.work, file)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not hold %q", file, old)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// applyCRDs applies CRD files server-side, as the test's field manager,
// and waits until the API server serves each.
func (c *cluster) applyCRDs(ctx context.Context, files []string) error {
	args := []string{"apply", "--server-side", "--field-manager=keyhole-e2e"}
	wait := []string{"wait", "--for=condition=Established", "--timeout=60s"}
	for _, f := range files {
		args = append(args, "-f", f)
		wait = append(wait, "-f", f)
	}
	if _, err := c.kubectl(ctx, nil, args...); err != nil {
		return err
	}
	_, err := c.kubectl(ctx, nil, wait...)
	return err
}
