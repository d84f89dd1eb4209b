//go:build e2e

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"keyhole.dev/keyhole/cli"
)

// committedImage is the sandbox image examples/argocd-committed's
// SandboxClass names; the test tags its own sandbox image so.
const committedImage = "registry.acme.internal/agents/workspace:1.4.2"

// TestArgoCDCommitted deploys examples/argocd-committed as an Argo CD
// without keyhole's plugin would, from a repository holding no render.
// Argo CD itself cannot run here (github.com/argoproj/argo-cd is not
// served by the Go module proxy), so the test does what it does, each
// step with the engine's own library where there is one:
//
//   - CI: `keyhole check --strict`, `keyhole render -o rendered`, commit;
//   - the ApplicationSet controller: one Application per directory of
//     apps/ (its git generator), the template's paths filled in with Go
//     templates as goTemplate does;
//   - the repo server: a clone at the commit, then, per source, `kustomize
//     build` (the kustomize API, as Argo CD vendors it) where the path
//     holds a kustomization, else the directory's YAML files as written;
//   - the application controller: the destination namespace created
//     (CreateNamespace=true), each source applied with server-side apply
//     (ServerSideApply=true), objects naming no namespace in the
//     destination's.
//
// external-secrets does not run either: its ExternalSecret kind is
// served by a stand-in CRD, and the test makes each Secret an
// ExternalSecret names, with its keys, as the controller would (a canary
// value, never printed). Each environment's sandbox then runs with its
// egress proxy beside it, and the proxy refuses a host no Connection
// names.
func TestArgoCDCommitted(t *testing.T) {
	ctx := context.Background()
	c := the
	c.prepareRenders(t, ctx)
	if _, err := c.ctr(ctx, "images", "tag", "--force", sandboxImage, committedImage); err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "agents-config")
	if err := os.CopyFS(repo, os.DirFS(filepath.Join(c.tools[repoRoot], "examples", "argocd-committed"))); err != nil {
		t.Fatal(err)
	}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=keyhole", "GIT_AUTHOR_EMAIL=e2e@keyhole.dev",
			"GIT_COMMITTER_NAME=keyhole", "GIT_COMMITTER_EMAIL=e2e@keyhole.dev", "GIT_CONFIG_NOSYSTEM=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out))
	}
	keyhole := func(args ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := cli.Main(args, &stdout, &stderr); code != 0 {
			t.Fatalf("keyhole %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())
		}
	}
	git(repo, "init", "-q", "-b", "main")
	git(repo, "add", "-A")
	git(repo, "commit", "-q", "-m", "inputs")
	if _, err := os.Stat(filepath.Join(repo, "rendered")); !os.IsNotExist(err) {
		t.Fatalf("the example holds rendered/ before the first render: %v", err)
	}
	// What the workflow does: check, render, commit.
	keyhole("check", "--strict", repo)
	keyhole("render", "-o", filepath.Join(repo, "rendered"), repo)
	git(repo, "add", "--all", "rendered")
	git(repo, "commit", "-q", "-m", "render")
	keyhole("check", "--strict", repo)

	// The repo server's copy of the commit.
	clone := filepath.Join(t.TempDir(), "clone")
	git(filepath.Dir(clone), "clone", "-q", repo, clone)

	apps := applicationSet(t, clone, filepath.Join("argocd", "apps", "agents.yaml"))
	if len(apps) != 2 {
		t.Fatalf("the ApplicationSet makes %d Applications, want 2 (prod, staging): %v", len(apps), apps)
	}
	for _, app := range apps {
		defer func() {
			if _, err := c.kubectl(ctx, nil, "delete", "namespace", app.namespace, "--wait=true", "--timeout=180s"); err != nil {
				t.Errorf("removing namespace %s: %v", app.namespace, err)
			}
		}()
	}
	c.installExternalSecretStandIn(t, ctx)
	for _, app := range apps {
		if _, err := c.kubectl(ctx, nil, "create", "namespace", app.namespace); err != nil {
			t.Fatal(err)
		}
		for _, p := range app.paths {
			objs := repoServerManifests(t, clone, p)
			if _, err := c.kubectl(ctx, objs, "apply", "--server-side", "--field-manager=argocd-controller", "-n", app.namespace, "-f", "-"); err != nil {
				t.Fatalf("Application %s, path %s: %v", app.name, p, err)
			}
			c.makeExternalSecrets(t, ctx, app.namespace, objs)
		}
	}
	for _, app := range apps {
		env := strings.TrimPrefix(app.namespace, "agents-")
		sandbox := env + "-coder-" + env + "-workspace-sandbox"
		t.Run(app.name, func(t *testing.T) {
			if _, err := c.kubectl(ctx, nil, "rollout", "status", "-n", app.namespace, "deployment/"+sandbox, "--timeout=300s"); err != nil {
				pods, _ := c.kubectl(ctx, nil, "describe", "pods", "-n", app.namespace)
				events, _ := c.kubectl(ctx, nil, "get", "events", "-n", app.namespace, "--sort-by=.lastTimestamp")
				t.Fatalf("%v\n%s\n%s", err, pods, events)
			}
			ready, err := c.kubectl(ctx, nil, "get", "pods", "-n", app.namespace, "-l", "app.kubernetes.io/component=sandbox,app.kubernetes.io/instance="+strings.TrimSuffix(sandbox, "-sandbox"),
				"-o", `jsonpath={range .items[*].status.containerStatuses[*]}{.name}={.ready} {end}{range .items[*].status.initContainerStatuses[*]}{.name}={.ready} {end}`)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("containers: %s", ready)
			if !strings.Contains(ready, "sandbox=true") || !strings.Contains(ready, "egress-proxy=true") {
				all, _ := c.kubectl(ctx, nil, "get", "pods", "-n", app.namespace, "-o", "wide")
				t.Fatalf("the sandbox's pod does not run the sandbox and its egress proxy, ready: %q\n%s", ready, all)
			}
			out, err := c.kubectl(ctx, nil, "exec", "-n", app.namespace, "deployment/"+sandbox, "-c", "sandbox", "--",
				"/bin/sh", "-c", `curl -sS -o /dev/null -D - https://example.com/ 2>&1; echo "curl exit $?"`)
			if err != nil {
				t.Fatalf("curl through the proxy: %v\n%s", err, out)
			}
			// The proxy answers the CONNECT itself, which curl reports
			// as exit 56.
			for _, want := range []string{"HTTP/1.1 403 Forbidden", refusalHeader + ": host-not-allowed", "curl exit 56"} {
				if !strings.Contains(out, want) {
					t.Errorf("a host no Connection names is not refused by the egress proxy (no %q):\n%s", want, out)
				}
			}
		})
	}
}

// committedApp is one Application an ApplicationSet makes: its name,
// destination namespace and its sources' paths.
type committedApp struct {
	name, namespace string
	paths           []string
}

// applicationSet makes the Applications of the ApplicationSet in file (a
// git directories generator over this repository, goTemplate), as its
// controller does: one per directory the generator's path matches, with
// {{.path.path}} and {{.path.basename}} filled in.
func applicationSet(t *testing.T, repo, file string) []committedApp {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repo, file))
	if err != nil {
		t.Fatal(err)
	}
	var set struct {
		Spec struct {
			Generators []struct {
				Git struct {
					Directories []struct{ Path string } `json:"directories"`
				} `json:"git"`
			} `json:"generators"`
			Template struct {
				Metadata struct{ Name string } `json:"metadata"`
				Spec     struct {
					Sources     []struct{ Path string }    `json:"sources"`
					Destination struct{ Namespace string } `json:"destination"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	fill := func(text string, vals map[string]any) string {
		tpl, err := template.New("").Option("missingkey=error").Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		if err := tpl.Execute(&b, vals); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	var apps []committedApp
	for _, g := range set.Spec.Generators {
		for _, d := range g.Git.Directories {
			matches, err := filepath.Glob(filepath.Join(repo, filepath.FromSlash(d.Path)))
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(matches)
			for _, m := range matches {
				if fi, err := os.Stat(m); err != nil || !fi.IsDir() {
					continue
				}
				rel, _ := filepath.Rel(repo, m)
				rel = filepath.ToSlash(rel)
				vals := map[string]any{"path": map[string]any{"path": rel, "basename": path.Base(rel)}}
				app := committedApp{
					name:      fill(set.Spec.Template.Metadata.Name, vals),
					namespace: fill(set.Spec.Template.Spec.Destination.Namespace, vals),
				}
				for _, s := range set.Spec.Template.Spec.Sources {
					app.paths = append(app.paths, fill(s.Path, vals))
				}
				apps = append(apps, app)
			}
		}
	}
	return apps
}

// repoServerManifests is what Argo CD's repo server makes of the path p
// of repo: kustomize's build where p holds a kustomization, with
// kustomize's defaults as `kustomize build` runs; else the YAML files at
// the top of p, as written (a directory source that does not recurse).
func repoServerManifests(t *testing.T, repo, p string) []byte {
	t.Helper()
	dir := filepath.Join(repo, filepath.FromSlash(p))
	if _, err := os.Stat(filepath.Join(dir, "kustomization.yaml")); err == nil {
		res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			t.Fatalf("kustomize build %s: %v", p, err)
		}
		out, err := res.AsYaml()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("Argo CD finds no directory %s: %v", p, err)
	}
	var b bytes.Buffer
	for _, e := range entries {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString("---\n")
		b.Write(data)
		b.WriteString("\n")
	}
	return b.Bytes()
}

// installExternalSecretStandIn serves external-secrets.io/v1
// ExternalSecret with a CRD of the test's own, which keeps whatever it
// is given: what the API server needs to accept the ExternalSecrets.
func (c *cluster) installExternalSecretStandIn(t *testing.T, ctx context.Context) {
	t.Helper()
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: externalsecrets.external-secrets.io}
spec:
  group: external-secrets.io
  scope: Namespaced
  names: {kind: ExternalSecret, listKind: ExternalSecretList, plural: externalsecrets, singular: externalsecret}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
	if _, err := c.kubectl(ctx, []byte(crd), "apply", "--server-side", "--field-manager=keyhole-e2e-setup", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.kubectl(ctx, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd/externalsecrets.external-secrets.io"); err != nil {
		t.Fatal(err)
	}
}

// makeExternalSecrets makes, in namespace, the Secret each ExternalSecret
// among objs names, with the keys it lists, as external-secrets would
// from its store: each value a canary of the test's, never printed.
func (c *cluster) makeExternalSecrets(t *testing.T, ctx context.Context, namespace string, objs []byte) {
	t.Helper()
	for _, doc := range bytes.Split(objs, []byte("\n---")) {
		var es struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Target struct {
					Name string `json:"name"`
				} `json:"target"`
				Data []struct {
					SecretKey string `json:"secretKey"`
				} `json:"data"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(bytes.TrimPrefix(doc, []byte("---")), &es); err != nil || es.Kind != "ExternalSecret" {
			continue
		}
		name := es.Spec.Target.Name
		if name == "" {
			name = es.Metadata.Name
		}
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Secret\nmetadata: {name: %s, namespace: %s}\ntype: Opaque\nstringData:\n", name, namespace)
		for _, d := range es.Spec.Data {
			fmt.Fprintf(&b, "  %s: %q\n", d.SecretKey, "keyholeE2Ecanary"+randomSuffix(t))
		}
		if _, err := c.kubectl(ctx, []byte(b.String()), "apply", "--server-side", "--field-manager=external-secrets", "-f", "-"); err != nil {
			t.Fatalf("making Secret %s/%s: %v", namespace, name, err)
		}
	}
}
