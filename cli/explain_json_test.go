package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestExplainJSON runs explain --format json as a script would, on the
// bundled example with a canary as the token: each shape parses, says what
// the text says, keeps text's exit codes, and holds no secret value.
func TestExplainJSON(t *testing.T) {
	const canary = "canary-explain-json-9b1f"
	files := example(t, "github-acme")
	files["secret.yaml"] = replaced(t, files["secret.yaml"], "replace-me", canary+"-replace-me")
	g := newGitFixture(t, files)
	g.write(map[string]string{"connection.yaml": acmeChange(t, files["connection.yaml"])})
	t.Chdir(g.dir)
	explain := func(t *testing.T, want int, v any, args ...string) {
		t.Helper()
		code, stdout, stderr := runIn(t, append([]string{"explain", "--format", "json"}, args...)...)
		if code != want {
			t.Fatalf("explain %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, stdout, stderr)
		}
		if strings.Contains(stdout+stderr, canary) {
			t.Fatalf("explain %s: the Secret's value is in the output", strings.Join(args, " "))
		}
		dec := json.NewDecoder(strings.NewReader(stdout))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("explain %s: %v\n%s", strings.Join(args, " "), err, stdout)
		}
	}

	t.Run("list", func(t *testing.T) {
		var got explainListJSON
		explain(t, exitOK, &got)
		if len(got.Sandboxes) != 1 || got.Sandboxes[0].Name != "support-workspace" || got.Sandboxes[0].Source.Kind != "AgentRuntime" {
			t.Fatalf("sandboxes %+v", got.Sandboxes)
		}
		hosts := map[string]explainHostJSON{}
		for _, h := range got.Sandboxes[0].Hosts {
			hosts[h.Name] = h
		}
		// The working tree injects uploads.github.com too.
		if h := hosts["uploads.github.com"]; h.Inject.Secret != "acme-github-token" || h.Inject.Header == nil {
			t.Errorf("uploads.github.com %+v", h)
		}
		if h := hosts["api.github.com"]; h.EveryRequest || len(h.Rules) != 2 {
			t.Errorf("api.github.com %+v", h)
		}
		for _, h := range hosts {
			if h.EveryRequest != (len(h.Rules) == 0) {
				t.Errorf("%s: everyRequest %v with %d rules", h.Name, h.EveryRequest, len(h.Rules))
			}
		}
	})
	t.Run("allowed request", func(t *testing.T) {
		var got explainOneJSON
		explain(t, exitOK, &got, "--sandbox", "support-workspace", "--request", "POST https://api.github.com/repos/acme/widgets/issues")
		d := got.Decision
		if d == nil || !d.Allowed || d.Action != "inject" || d.Connection != "github-acme" || d.Inject == nil || d.Inject.Header.Name != "Authorization" {
			t.Fatalf("decision %+v", d)
		}
	})
	t.Run("refused request", func(t *testing.T) {
		var got explainOneJSON
		explain(t, exitFailed, &got, "--sandbox", "agents/support-workspace", "--request", "DELETE https://api.github.com/repos/acme/widgets")
		d := got.Decision
		if d == nil || d.Allowed || d.Status != 403 || d.Reason != "l7-not-allowed" || d.Inject != nil {
			t.Fatalf("decision %+v", d)
		}
	})
	t.Run("base, list", func(t *testing.T) {
		var got explainChangeListJSON
		explain(t, exitOK, &got, "--base", "main")
		if got.Base.Name != "main" || len(got.Sandboxes) != 1 || got.Sandboxes[0].Verdict != "widened" {
			t.Fatalf("%+v", got)
		}
	})
	t.Run("base, request", func(t *testing.T) {
		var got explainChangeJSON
		explain(t, exitOK, &got, "--base", "main", "--sandbox", "support-workspace", "--request", "POST https://api.github.com/repos/acme/widgets/issues")
		if got.Sandbox.Access.Verdict != "widened" || len(got.Sandbox.Access.Widened) == 0 {
			t.Fatalf("sandbox change %+v", got.Sandbox)
		}
		if d := got.Decision; d == nil || d.Base == nil || d.Head == nil || d.Base.Allowed || !d.Head.Allowed {
			t.Fatalf("decisions %+v", got.Decision)
		}
	})
	t.Run("unknown format", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := run(&env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr}, []string{"explain", "--format", "yaml"}); code != exitUsage || !strings.Contains(stderr.String(), `unknown format "yaml"`) {
			t.Fatalf("exit %d, stderr %q", code, stderr.String())
		}
	})
}
