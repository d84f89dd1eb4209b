package cli

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// hostileCanary stands for the CI job's token: in .git/config, where the
// checkout step persists it, in files outside the repository, and in a
// file the job left in its working tree.
const hostileCanary = "ghs_H0st1leC4n4ryQ9xZ7Wm2Lp5Vb8Nd1Hs6Jf"

// hexCanary is a token of lowercase hex, which passes the schema of a
// name or a host: a check's own message, not the schema's, would name it.
const hexCanary = "0f3a9c1e7b2d4a6f8e0c1b3d5f7a9c2e4b6d8f0a"

// TestHostileReadsConfined: a pull request whose kustomizations, Flux
// Kustomizations and Argo CD Applications read files outside the
// repository, or in its .git directory, reads none of them, and says so;
// and a value the build copied from a file it may read (a window of it,
// cut by a replacement's delimiter and index) is not quoted in any
// message. Every format of check, and diff's markdown, is searched for
// any ten bytes of the canary.
func TestHostileReadsConfined(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows makes no symbolic links without a privilege the test lacks, and half the cases are links out of the tree; make test runs on Linux")
	}
	acme := example(t, "github-acme")
	rootKustomization := func(generator, replacements string) string {
		return "resources: [sandboxclass.yaml, connection.yaml, secret.yaml, agentruntime.yaml]\n" +
			"configMapGenerator:\n  - name: leak\n" + generator + "replacements:\n" + replacements
	}
	toImage := "  - source: {kind: ConfigMap, name: leak, fieldPath: data.config}\n    targets: [{select: {kind: SandboxClass}, fieldPaths: [spec.image]}]\n"
	envToImage := "  - source: {kind: ConfigMap, name: leak, fieldPath: data.TOKEN}\n    targets: [{select: {kind: SandboxClass}, fieldPaths: [spec.image]}]\n"
	window := func(kind, field string) string {
		return "  - source: {kind: ConfigMap, name: leak, fieldPath: data.config, options: {delimiter: 'basic ', index: 1}}\n" +
			"    targets: [{select: {kind: " + kind + "}, fieldPaths: [" + field + "]}]\n"
	}
	hexWindow := "  - source: {kind: ConfigMap, name: leak, fieldPath: data.config, options: {delimiter: 'token: ', index: 1}}\n" +
		"    targets: [{select: {kind: AgentRuntime}, fieldPaths: [spec.sandbox.connections.0.connection]}]\n"
	fluxApps := "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
		"spec: {interval: 10m, sourceRef: {kind: GitRepository, name: flux-system}, path: ./apps, prune: true}\n"
	argoApp := func(helm string) string {
		return "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: agents, namespace: argocd}\n" +
			"spec:\n  destination: {server: https://kubernetes.default.svc, namespace: agents}\n" +
			"  source:\n    repoURL: https://github.com/acme/agents.git\n    path: charts/agent\n    helm: " + helm + "\n"
	}
	// The chart renders github-acme, its SandboxClass's image from the
	// values.
	chart := map[string]string{
		"charts/agent/Chart.yaml":  "apiVersion: v2\nname: agent\nversion: 1.0.0\n",
		"charts/agent/values.yaml": "image: ghcr.io/acme/agent-workspace:1.4.2\n",
		"charts/agent/templates/connection.yaml": strings.Replace(acme["connection.yaml"],
			`value: "Bearer {{ .token }}"`, `value: {{ "Bearer {{ .token }}" | quote }}`, 1),
		"charts/agent/templates/secret.yaml":  acme["secret.yaml"],
		"charts/agent/templates/runtime.yaml": acme["agentruntime.yaml"],
		"charts/agent/templates/sandboxclass.yaml": strings.Replace(acme["sandboxclass.yaml"],
			"image: ghcr.io/acme/agent-workspace:1.4.2", "image: {{ .Values.image | quote }}", 1),
	}
	// The same chart at the repository's root, whose files .Files reads.
	rootChart := map[string]string{}
	for k, v := range chart {
		rootChart[strings.TrimPrefix(k, "charts/agent/")] = v
	}
	rootChart["argocd/app.yaml"] = strings.Replace(argoApp("{releaseName: agents}"), "path: charts/agent", "path: .", 1)
	withChart := func(files map[string]string) map[string]string {
		for k, v := range chart {
			files[k] = v
		}
		return files
	}
	const outsideMark = "@OUT@" // the directory outside the repository
	tests := map[string]struct {
		base, head map[string]string
		links      map[string]string // in the head: name → target
		untracked  map[string]string // in the head's working tree, not committed
		want       string            // in the output of every format
	}{
		"a generator reads .git/config into an image": {
			head: map[string]string{"kustomization.yaml": rootKustomization("    files: [config=.git/config]\n", toImage)},
			want: "outside the repository",
		},
		"a replacement's window of .git/config into schema errors": {
			head: map[string]string{"kustomization.yaml": rootKustomization("    files: [config=.git/config]\n",
				window("Connection", "spec.credential.kind")+window("Connection", "spec.hosts.0"))},
			want: "outside the repository",
		},
		"Flux present, a generator climbs out with ../": {
			head: map[string]string{"clusters/apps.yaml": fluxApps, "apps/kustomization.yaml": "resources: [sandboxclass.yaml, connection.yaml, secret.yaml, agentruntime.yaml]\n" +
				"configMapGenerator:\n  - name: leak\n    envs: [@REL@/secret.env]\nreplacements:\n" + envToImage},
			want: "outside the repository",
		},
		"Flux present, a generator names an absolute path": {
			head: map[string]string{"clusters/apps.yaml": fluxApps, "apps/kustomization.yaml": "resources: [sandboxclass.yaml, connection.yaml, secret.yaml, agentruntime.yaml]\n" +
				"configMapGenerator:\n  - name: leak\n    envs: [" + outsideMark + "/secret.env]\nreplacements:\n" + envToImage},
			want: "outside the repository",
		},
		"Flux present, a generator reads .git/config with ../": {
			head: map[string]string{"clusters/apps.yaml": fluxApps, "apps/kustomization.yaml": "resources: [sandboxclass.yaml, connection.yaml, secret.yaml, agentruntime.yaml]\n" +
				"configMapGenerator:\n  - name: leak\n    files: [config=../.git/config]\nreplacements:\n" + toImage},
			want: "outside the repository",
		},
		"a link into .git": {
			head:  map[string]string{"kustomization.yaml": rootKustomization("    files: [config=gitconfig]\n", toImage)},
			links: map[string]string{"gitconfig": ".git/config"},
			want:  "symbolic link whose target is outside",
		},
		"Flux present, a link out of the tree": {
			head: map[string]string{"clusters/apps.yaml": fluxApps, "apps/kustomization.yaml": "resources: [sandboxclass.yaml, connection.yaml, secret.yaml, agentruntime.yaml]\n" +
				"configMapGenerator:\n  - name: leak\n    envs: [leak.env]\nreplacements:\n" + envToImage},
			links: map[string]string{"apps/leak.env": outsideMark + "/secret.env"},
			want:  "symbolic link whose target is outside",
		},
		"Argo CD Helm fileParameters ../../.git/config": {
			base: withChart(map[string]string{"argocd/app.yaml": argoApp("{releaseName: agents}")}),
			head: map[string]string{"argocd/app.yaml": argoApp("{releaseName: agents, fileParameters: [{name: image, path: ../../.git/config}]}")},
			want: "outside the repository",
		},
		"Argo CD Helm valueFiles through a link out of the tree": {
			base:  withChart(map[string]string{"argocd/app.yaml": argoApp("{releaseName: agents}")}),
			head:  map[string]string{"argocd/app.yaml": argoApp("{releaseName: agents, valueFiles: [../../envs/values-ci.yaml]}"), "envs/README.md": "values\n"},
			links: map[string]string{"envs/values-ci.yaml": outsideMark + "/values.yaml"},
			want:  "outside the repository",
		},
		"Argo CD Helm valueFiles in .git": {
			base:      withChart(map[string]string{"argocd/app.yaml": argoApp("{releaseName: agents}")}),
			head:      map[string]string{"argocd/app.yaml": argoApp("{releaseName: agents, valueFiles: [../../.git/values.yaml]}")},
			untracked: map[string]string{".git/values.yaml": "image: " + hostileCanary + "\n"},
			want:      "outside the repository",
		},
		"a chart at the root reads .git/config with .Files.Get": {
			base: rootChart,
			head: map[string]string{"templates/sandboxclass.yaml": strings.Replace(chart["charts/agent/templates/sandboxclass.yaml"],
				"{{ .Values.image | quote }}", `{{ required "the chart holds no .git/config" (.Files.Get ".git/config") | quote }}`, 1)},
			want: "the chart holds no .git/config",
		},
		"a replacement's window of a file the job left in the tree, into schema errors": {
			head: map[string]string{"kustomization.yaml": rootKustomization("    files: [config=creds.txt]\n",
				window("Connection", "spec.credential.kind")+window("Connection", "spec.hosts.0")+window("AgentRuntime", "spec.sandbox.connections.0.sandbox"))},
			untracked: map[string]string{"creds.txt": "Authorization: basic " + hostileCanary + "\n"},
			want:      "the value is not allowed here; want one of secret, githubApp, awsSigV4, oauth2, googleServiceAccount (value set by kustomization.yaml)",
		},
		"a replacement's window of a file the job left in the tree, into a check's message": {
			head:      map[string]string{"kustomization.yaml": rootKustomization("    files: [config=creds.txt]\n", hexWindow)},
			untracked: map[string]string{"creds.txt": "token: " + hexCanary},
			want:      "Connection agents/the value is not in the input",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			outside := t.TempDir()
			for f, body := range map[string]string{
				"secret.env":  "TOKEN=" + hostileCanary + "\n",
				"values.yaml": "image: " + hostileCanary + "\n",
			} {
				if err := os.WriteFile(filepath.Join(outside, f), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			base := tc.base
			if base == nil {
				base = map[string]string{}
				for k, v := range acme {
					base[k] = v
				}
				if _, flux := tc.head["clusters/apps.yaml"]; flux {
					base = map[string]string{"clusters/apps.yaml": fluxApps}
					for k, v := range acme {
						base["apps/"+k] = v
					}
					base["apps/kustomization.yaml"] = "resources: [sandboxclass.yaml, connection.yaml, secret.yaml, agentruntime.yaml]\n"
				} else {
					base["kustomization.yaml"] = "resources: [sandboxclass.yaml, connection.yaml, secret.yaml, agentruntime.yaml]\n"
				}
			}
			g := newGitFixture(t, base)
			// As actions/checkout persists the job's token.
			f, err := os.OpenFile(filepath.Join(g.dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString("[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic " + hostileCanary + "\n"); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			head := map[string]string{}
			rel, err := filepath.Rel(filepath.Join(g.dir, "apps"), outside)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.head {
				v = strings.ReplaceAll(v, outsideMark, outside)
				head[k] = strings.ReplaceAll(v, "@REL@", filepath.ToSlash(rel))
			}
			if len(tc.links) == 0 {
				// The same pull request as commits, which diff reads in
				// place: a commit's tree holds no .git, and nothing
				// outside it.
				committed := map[string]string{}
				for k, v := range head {
					committed[k] = v
				}
				for k, v := range tc.untracked {
					if !strings.HasPrefix(k, ".git/") {
						committed[k] = v
					}
				}
				g.branch("pr", committed)
			}
			g.write(head)
			g.write(tc.untracked)
			for name, target := range tc.links {
				p := filepath.Join(g.dir, filepath.FromSlash(name))
				if err := os.Symlink(strings.ReplaceAll(target, outsideMark, outside), p); err != nil {
					t.Fatal(err)
				}
			}
			t.Chdir(g.dir)
			runs := map[string][]string{"diff markdown": {"diff", "--base", "main", "--format", "markdown"}}
			if len(tc.links) == 0 {
				runs["diff markdown of commits"] = []string{"diff", "--base", "main", "--head", "pr", "--format", "markdown"}
			}
			for _, format := range []string{"text", "json", "github", "sarif"} {
				runs["check "+format] = []string{"check", "--format", format, "."}
			}
			for run, args := range runs {
				_, stdout, stderr := runIn(t, args...)
				out := stdout + stderr
				for _, c := range []string{hostileCanary, hexCanary} {
					for i := 0; i+10 <= len(c); i++ {
						if strings.Contains(out, c[i:i+10]) {
							t.Errorf("%s: the output holds %q of the canary:\n%s", run, c[i:i+10], out)
							break
						}
					}
				}
				if !strings.Contains(out, tc.want) {
					t.Errorf("%s: the output does not say %q:\n%s", run, tc.want, out)
				}
			}
		})
	}
}
