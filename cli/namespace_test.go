package cli

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestEngineNamespaceAgrees: where an engine applies a unit's objects
// that name no namespace in a namespace of its own (an Argo CD
// Application's destination.namespace, a Flux HelmRelease's or
// Kustomization's targetNamespace), render writes that namespace, and
// explain and diff (every format) name the sandbox there too.
func TestEngineNamespaceAgrees(t *testing.T) {
	acme := example(t, "github-acme")
	agent := map[string]string{}
	for _, f := range []string{"connection.yaml", "sandboxclass.yaml", "agentruntime.yaml", "secret.yaml"} {
		agent[f] = strings.ReplaceAll(acme[f], "  namespace: agents\n", "")
	}
	under := func(dir string, files map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range files {
			out[dir+"/"+k] = v
		}
		return out
	}
	kustomized := under("apps/agent", agent)
	kustomized["apps/agent/kustomization.yaml"] = "resources: [connection.yaml, sandboxclass.yaml, agentruntime.yaml, secret.yaml]\n"
	chart := map[string]string{"charts/agent/Chart.yaml": "apiVersion: v2\nname: agent\nversion: 0.1.0\n"}
	for f, body := range agent {
		chart["charts/agent/templates/"+f] = strings.ReplaceAll(body, `"Bearer {{ .token }}"`, `"Bearer {{ "{{ .token }}" }}"`)
	}
	const flux = "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: agent, namespace: flux-system}\n" +
		"spec:\n  path: ./apps/agent\n  targetNamespace: team-a\n  sourceRef: {kind: GitRepository, name: flux-system}\n"
	tests := map[string]struct {
		files map[string]string
		conn  string // the Connection's file, which the change edits
	}{
		"Argo CD destination.namespace": {
			files: withFile(kustomized, "argocd/app.yaml", "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: agent, namespace: argocd}\n"+
				"spec:\n  source: {repoURL: https://example.com/r.git, path: apps/agent}\n  destination: {server: https://kubernetes.default.svc, namespace: team-a}\n"),
			conn: "apps/agent/connection.yaml",
		},
		"HelmRelease targetNamespace": {
			files: withFile(chart, "releases/agent.yaml", "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: agent, namespace: flux-system}\n"+
				"spec:\n  targetNamespace: team-a\n  chart:\n    spec:\n      chart: ./charts/agent\n      sourceRef: {kind: GitRepository, name: flux-system}\n"),
			conn: "charts/agent/templates/connection.yaml",
		},
		"Flux Kustomization targetNamespace": {
			files: withFile(kustomized, "clusters/main/agent.yaml", flux),
			conn:  "apps/agent/connection.yaml",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := newGitFixture(t, tc.files)
			g.write(map[string]string{tc.conn: replaced(t, tc.files[tc.conn], "pathPrefixes: [/repos/acme/widgets/pulls]", "pathPrefixes: [/repos/acme/widgets/pulls, /repos/acme/widgets/issues]")})
			t.Chdir(g.dir)

			code, stdout, stderr := runIn(t, "render", "--stdout")
			if code != exitOK {
				t.Fatalf("render: exit %d\n%s%s", code, stdout, stderr)
			}
			namespaces := regexp.MustCompile(`(?m)^  namespace: (\S+)$`).FindAllStringSubmatch(stdout, -1)
			if len(namespaces) == 0 {
				t.Fatalf("render wrote no namespace:\n%s", stdout)
			}
			for _, m := range namespaces {
				if m[1] != "team-a" {
					t.Errorf("render wrote namespace %s, want team-a", m[1])
				}
			}

			code, stdout, stderr = runIn(t, "explain", "--format", "json")
			if code != exitOK {
				t.Fatalf("explain: exit %d\n%s%s", code, stdout, stderr)
			}
			var list explainListJSON
			if err := json.Unmarshal([]byte(stdout), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Sandboxes) != 1 || list.Sandboxes[0].Namespace != "team-a" {
				var got []string
				for _, s := range list.Sandboxes {
					got = append(got, s.Namespace+"/"+s.Name)
				}
				t.Errorf("explain: %q, want one sandbox in team-a", got)
			}
			code, stdout, stderr = runIn(t, "explain")
			if code != exitOK || !strings.HasPrefix(stdout, "team-a/support-workspace\t") {
				t.Errorf("explain: exit %d, want the sandbox named team-a/support-workspace:\n%s%s", code, stdout, stderr)
			}

			code, stdout, stderr = runIn(t, "diff", "--base", "main", "--format", "json")
			if code != exitFailed {
				t.Fatalf("diff: exit %d\n%s%s", code, stdout, stderr)
			}
			var res struct {
				Sandboxes []struct {
					Namespace, Name string
				}
			}
			if err := json.Unmarshal([]byte(stdout), &res); err != nil {
				t.Fatal(err)
			}
			if len(res.Sandboxes) != 1 || res.Sandboxes[0].Namespace != "team-a" {
				t.Errorf("diff --format json: %+v, want one sandbox in team-a", res.Sandboxes)
			}
			for _, format := range []string{"text", "markdown"} {
				_, stdout, _ = runIn(t, "diff", "--base", "main", "--format", format)
				if !strings.Contains(stdout, "team-a/support-workspace") || strings.Contains(stdout, "default/support-workspace") {
					t.Errorf("diff --format %s does not name the sandbox team-a/support-workspace:\n%s", format, stdout)
				}
			}
		})
	}
}

// withFile is files with one more.
func withFile(files map[string]string, name, body string) map[string]string {
	out := map[string]string{name: body}
	for k, v := range files {
		if !slices.Contains([]string{name}, k) {
			out[k] = v
		}
	}
	return out
}
