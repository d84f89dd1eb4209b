package source

import (
	"testing"

	"keyhole.dev/keyhole/diag"
)

// An agent.yaml at the top of a Helm chart, or in its templates, is in no
// render (helm renders templates, and an agent.yaml is no Kubernetes
// object): it is said once, as a file its unit never deploys, whether the
// chart renders (it holds a Connection) or is skipped. A template named
// agent.yaml that writes an object is rendered as any template is: not
// said, and its object checked.
func TestAgentInHelmChart(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"charts/agents/Chart.yaml":                helmChart,
		"charts/agents/values.yaml":               "name: github\nsecret: gh-token\ntier: 1\n",
		"charts/agents/templates/connection.yaml": helmConn,
		"charts/agents/agent.yaml":                "name: support\nconnectors:\n  - name: github\n",
		"charts/web/Chart.yaml":                   "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/templates/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n",
		"charts/web/templates/agent.yml":          "name: web\n",
		"charts/other/Chart.yaml":                 helmChart,
		"charts/other/values.yaml":                "name: other\nsecret: other-token\ntier: 1\n",
		"charts/other/templates/agent.yaml":       helmConn,
		"apps/agent.yaml":                         "name: outside\n",
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if helmObjects(t, docs)["Connection default/other"] == nil {
		t.Errorf("the Connection of charts/other/templates/agent.yaml was not rendered: %q", docIDs(docs))
	}
	got := map[string]int{}
	for _, d := range ds {
		if d.Code == CodeInputNotDeployed {
			got[d.Pos.File]++
			if d.Severity != diag.Warning || d.Pos.Line != 1 {
				t.Errorf("%v: want a warning at line 1", d)
			}
		}
	}
	for _, f := range []string{"charts/agents/agent.yaml", "charts/web/templates/agent.yml"} {
		if got[f] != 1 {
			t.Errorf("%s said %d times, want once: %v", f, got[f], ds)
		}
	}
	if len(got) != 2 {
		t.Errorf("files said not deployed: %v, want the two in charts", got)
	}
}
