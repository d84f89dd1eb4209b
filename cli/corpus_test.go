package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"keyhole.dev/keyhole/internal/golden"
)

// The corpus under testdata/repos is fixture repositories written for
// these tests, each modeled on the layout of a kind of public GitOps
// repository that also holds everything else a cluster runs:
//
//   - flux-monorepo: a Flux monorepo (clusters/<cluster> with Flux's own
//     objects, infrastructure/ controllers and configs, apps/base and one
//     overlay per cluster), the agents in a base both overlays build.
//   - argocd-apps: an Argo CD app of apps (a Helm chart of Applications),
//     plain and Helm and kustomize guestbooks, a legacy kustomization with
//     string patches, jsonnet, the agents as a base with two overlays.
//   - helm-charts: a Helm chart repository (charts/<chart> with templates
//     and ci values, a ct.yaml), docs with templated snippets, a JSON index
//     and a docs example Secret no Connection reads, the agents in deploy/.
//   - controller: a kubebuilder controller (config/ crd, rbac, manager,
//     default with a namePrefix, samples, testdata; a Helm chart, JSON
//     and list fixtures under internal/), the agents in config/agents,
//     which config/default and config/dev both build.
//   - flux-home-ops: a Flux home-lab (a cluster Kustomization over
//     kubernetes/apps, one ks.yaml per app listed by its namespace's
//     kustomization, postBuild substitution from a ConfigMap and a
//     SOPS-encrypted Secret), the agents' Connection host and Secret name
//     made by substitution, their credential from an ExternalSecret.
//   - argocd-appset: Argo CD ApplicationSets (a git directory generator
//     over the agents' environments, each to its own cluster), a
//     directory Application and a local Helm chart's.

// corpus lists the fixture repositories.
var corpus = []string{"argocd-apps", "argocd-appset", "controller", "flux-home-ops", "flux-monorepo", "helm-charts"}

// unrendered counts, for each repository of the corpus whose Argo CD
// Applications apply the agents' inputs as written (a plain kustomize
// source, not keyhole's plugin), its ArgoCDUnrendered warnings: one per
// place that writes such Applications (an ApplicationSet's Applications
// share one, and so do those one range of an app of apps' template
// writes, placed at the template's lines), the one warning its check
// gives.
var unrendered = map[string]int{"argocd-apps": 1, "argocd-appset": 1}

// unrenderedLine reports whether l is an ArgoCDUnrendered warning.
func unrenderedLine(l string) bool { return strings.Contains(l, " warning ArgoCDUnrendered: ") }

// TestCorpusClean: each repository checks clean, as a new user would run
// keyhole on it: exit 0, no error or warning (but the ArgoCDUnrendered
// warnings of unrendered), and the one line that counts what was
// skipped. render, explain and the JSON output agree.
func TestCorpusClean(t *testing.T) {
	for _, name := range corpus {
		t.Run(name, func(t *testing.T) {
			pkg, err := os.Getwd()
			if err != nil {
				t.Fatal(err)
			}
			copyRepo(t, name)
			code, out, errOut := runIn(t, "check", ".")
			if code != exitOK || errOut != "" {
				t.Fatalf("check: exit %d\n%s%s", code, out, errOut)
			}
			warned := 0
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if unrenderedLine(l) {
					warned++
					continue
				}
				if strings.Contains(l, " error ") || strings.Contains(l, " warning ") {
					t.Errorf("check is not clean: %s", l)
				}
			}
			if warned != unrendered[name] {
				t.Errorf("%d ArgoCDUnrendered warnings, want %d", warned, unrendered[name])
			}
			goldenFile(t, filepath.Join(pkg, "testdata", "repos-want", name+".txt"), []byte(out))

			code, out, errOut = runIn(t, "check", "--format", "json", ".")
			var doc struct {
				Summary struct {
					Errors, Warnings int
					Units            []string
				}
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil || code != exitOK {
				t.Fatalf("check --format json: exit %d, %v\n%s", code, err, errOut)
			}
			if doc.Summary.Errors != 0 || doc.Summary.Warnings != unrendered[name] || len(doc.Summary.Units) < 2 {
				t.Errorf("json summary: %+v", doc.Summary)
			}

			if code, _, errOut = runIn(t, "render", "-o", "out", "."); code != exitOK {
				t.Errorf("render: exit %d\n%s", code, errOut)
			}
			if code, out, errOut = runIn(t, "explain", "."); code != exitOK || !strings.Contains(out, "support-workspace") {
				t.Errorf("explain: exit %d\n%s%s", code, out, errOut)
			}
		})
	}
}

// TestCorpusSeeded: each repository with one keyhole mistake seeded into
// the base its overlays share gives exactly that one error, at its line,
// once, naming the deploy units it affects.
func TestCorpusSeeded(t *testing.T) {
	tests := map[string]struct {
		repo, file, old, new string
		want                 string // the one line check prints about it
	}{
		"flux: a key the Secret does not have": {
			repo: "flux-monorepo", file: "apps/base/agents/connection.yaml",
			old: `value: "Bearer {{ .token }}"`, new: `value: "Bearer {{ .tokn }}"`,
			want: `apps/base/agents/connection.yaml:15:27: error ConnectionSecretKeyMissing: key "tokn" is not in Secret agents/acme-github-token; SealedSecret agents/acme-github-token writes "token", one edit from it: correct whichever of the two is misspelt (it has: token, user) (in 2 deploy units: flux:flux-system/apps@clusters/production, flux:flux-system/apps@clusters/staging)`,
		},
		"flux home-ops: a key the Secret does not have, in an app a ks.yaml builds": {
			repo: "flux-home-ops", file: "kubernetes/apps/default/agents/app/connection.yaml",
			old: `value: "Bearer {{ .token }}"`, new: `value: "Bearer {{ .tokn }}"`,
			want: `kubernetes/apps/default/agents/app/connection.yaml:18:27: error ConnectionSecretKeyMissing: key "tokn" is not in Secret default/agents-github-secret; ExternalSecret default/agents-github writes "token", one edit from it: correct whichever of the two is misspelt (it has: token) (in deploy unit flux:default/agents)`,
		},
		"argocd appset: a binding to a Connection that is not there": {
			repo: "argocd-appset", file: "apps/agents/base/agentruntime.yaml",
			old: "connection: github-acme", new: "connection: github-acm",
			want: `apps/agents/base/agentruntime.yaml:17:21: error BindingConnectionMissing: Connection agents/github-acm is not in the input; did you mean "github-acme"? (in 2 deploy units: argocd:argocd/agents-dev, argocd:argocd/agents-prod)`,
		},
		"argocd: a binding to a Connection that is not there": {
			repo: "argocd-apps", file: "agents/base/agentruntime.yaml",
			old: "connection: github-acme", new: "connection: github-acm",
			want: `agents/base/agentruntime.yaml:13:21: error BindingConnectionMissing: Connection agents-dev/github-acm is not in the input; did you mean "github-acme"? (in 2 deploy units: argocd:argocd/example.agents-dev, argocd:argocd/example.agents-prod; as argocd:argocd/example.agents-dev builds it)`,
		},
		"helm repo: a placeholder variable that is not a variable name": {
			repo: "helm-charts", file: "deploy/base/connection.yaml",
			old: "placeholderEnv: [GH_TOKEN]", new: "placeholderEnv: [GH-TOKEN]",
			want: `deploy/base/connection.yaml:16:26: error SchemaInvalid: "GH-TOKEN" is not an environment variable name: want letters, digits and underscores, not starting with a digit (in 2 deploy units: deploy/overlays/ci, deploy/overlays/release)`,
		},
		"controller: an injection for a host the Connection does not list": {
			repo: "controller", file: "config/agents/connection.yaml",
			old: "- hosts: [api.github.com]", new: "- hosts: [api.github.com, uploads.github.com]",
			want: `config/agents/connection.yaml:13:33: error ConnectionInjectHostUnlisted: inject entry 0 covers uploads.github.com, which spec.hosts does not list; add it to spec.hosts or remove it here (in 2 deploy units: config/default, config/dev)`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := copyRepo(t, tc.repo)
			p := filepath.Join(dir, filepath.FromSlash(tc.file))
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Count(b, []byte(tc.old)) != 1 {
				t.Fatalf("%s holds %q %d times, want once", tc.file, tc.old, bytes.Count(b, []byte(tc.old)))
			}
			if err := os.WriteFile(p, bytes.Replace(b, []byte(tc.old), []byte(tc.new), 1), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errOut := runIn(t, "check", ".")
			if code != exitFailed || errOut != "" {
				t.Fatalf("check: exit %d, want %d\n%s%s", code, exitFailed, out, errOut)
			}
			var found []string
			for _, l := range strings.Split(out, "\n") {
				if (strings.Contains(l, " error ") || strings.Contains(l, " warning ")) && !unrenderedLine(l) {
					found = append(found, l)
				}
			}
			if len(found) != 1 || found[0] != tc.want {
				t.Errorf("got:\n%s\nwant exactly:\n%s", strings.Join(found, "\n"), tc.want)
			}
			if code, _, _ := runIn(t, "render", "-o", "out", "."); code != exitFailed {
				t.Errorf("render: exit %d, want %d", code, exitFailed)
			}
		})
	}
}

// copyRepo copies a corpus repository into a new directory and makes it
// the working directory.
func copyRepo(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "repos", name))); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	return dir
}

// goldenFile compares got with the file at path (KEYHOLE_UPDATE=1
// rewrites it).
func goldenFile(t *testing.T, path string, got []byte) {
	t.Helper()
	golden.Check(t, path, got)
}
