package diff

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/internal/testrepo"
	"keyhole.dev/keyhole/proxy/policy"
	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
	"keyhole.dev/keyhole/source/fixture"
)

// canary is the value of every Secret key in the fixtures: no report may
// hold it.
const canary = "CANARY-diff-5b1e-do-not-print"

// acme is the github-acme example with the canary as its Secret's values.
func acme() map[string]string {
	return map[string]string{
		"agentruntime.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata: {name: support, namespace: agents}
spec:
  promptPackRef: {name: support}
  facades: [{type: websocket}]
  sandbox:
    enabled: true
    connections:
      - {sandbox: workspace, role: vcs, connection: github-acme}
`,
		"sandboxclass.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: SandboxClass
metadata: {name: workspace, namespace: agents}
spec:
  image: ghcr.io/acme/agent-workspace:1.4.2
  connections:
    - role: vcs
`,
		"secret.yaml": `apiVersion: v1
kind: Secret
metadata: {name: acme-github-token, namespace: agents}
stringData:
  user: ` + canary + `
  token: ` + canary + `
  other: ` + canary + `
`,
		"connection.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: github-acme, namespace: agents}
spec:
  hosts: [api.github.com, github.com]
  credential:
    kind: secret
    secretRef: {name: acme-github-token}
  placement:
    inject:
      - hosts: [api.github.com]
        header: Authorization
        value: "Bearer {{ .token }}"
        placeholderEnv: [GH_TOKEN]
        rules:
          - methods: [GET, HEAD]
            pathPrefixes: [/repos/acme/widgets]
      - hosts: [github.com]
        basic: {usernameKey: user, passwordKey: token}
`,
	}
}

// with returns files with edits applied: each old → new replacement in
// the named file (which must change), or a new file when old is "".
func with(t *testing.T, files map[string]string, name, old, new string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range files {
		out[k] = v
	}
	if old == "" {
		out[name] = new
		return out
	}
	if !strings.Contains(out[name], old) {
		t.Fatalf("%s does not hold %q", name, old)
	}
	out[name] = strings.Replace(out[name], old, new, 1)
	return out
}

// renderSide loads, checks and renders files as keyhole render does.
func renderSide(t testing.TB, name string, files map[string]string) Side {
	t.Helper()
	dir := t.TempDir()
	testrepo.WriteFiles(t, dir, files)
	return renderDir(t, name, dir)
}

func renderDir(t testing.TB, name, dir string) Side {
	t.Helper()
	docs, ds, err := source.Load([]string{"."}, source.Options{Engines: engines.All(), Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	v := fixture.Validator(t)
	res := compiler.Compile(docs, v, compiler.Options{})
	res.Diagnostics = append(ds, res.Diagnostics...)
	if res.Diagnostics.HasErrors() {
		t.Fatalf("%s: the check found errors: %v", name, res.Diagnostics)
	}
	files, err := render.Render(res.Plan, render.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return Side{Ref: Ref{Name: name}, Files: files, Sandboxes: res.Plan.Sandboxes}
}

// allFormats writes r in every format.
func allFormats(t *testing.T, r Result) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range Formats() {
		var b bytes.Buffer
		if err := Write(&b, f, r); err != nil {
			t.Fatal(err)
		}
		out[f] = b.String()
	}
	return out
}

func TestCompare(t *testing.T) {
	base := acme()
	for name, tc := range map[string]struct {
		head map[string]string
		// want* are what the result must hold.
		changed     bool
		resources   []string // Change + " " + ID, in order
		sandbox     Change
		policyLines []string // policyLines of the one sandbox
	}{
		"no change": {head: base},
		"a source file moved": {
			head: func() map[string]string {
				h := with(t, base, "moved/deeper/connection.yaml", "", base["connection.yaml"])
				delete(h, "connection.yaml")
				return h
			}(),
		},
		"a rule added": {
			head: with(t, base, "connection.yaml", "            pathPrefixes: [/repos/acme/widgets]\n",
				"            pathPrefixes: [/repos/acme/widgets]\n          - methods: [POST]\n            pathPrefixes: [/repos/acme/widgets/pulls]\n"),
			changed: true,
			resources: []string{
				"changed ConfigMap agents/support-workspace-egress-proxy",
				"changed agents/support-workspace/proxy.json",
			},
			sandbox:     Changed,
			policyLines: []string{"+ rule on api.github.com: POST /repos/acme/widgets/pulls"},
		},
		"every rule removed widens the host": {
			head:    with(t, base, "connection.yaml", "        rules:\n          - methods: [GET, HEAD]\n            pathPrefixes: [/repos/acme/widgets]\n", ""),
			changed: true,
			resources: []string{
				"changed ConfigMap agents/support-workspace-egress-proxy",
				"changed agents/support-workspace/proxy.json",
			},
			sandbox: Changed,
			policyLines: []string{
				"- rule on api.github.com: GET,HEAD /repos/acme/widgets",
				"+ rule on api.github.com: " + AnyRequest,
			},
		},
		"an injection template changed": {
			head:    with(t, base, "connection.yaml", `value: "Bearer {{ .token }}"`, `value: "token {{ .other }}"`),
			changed: true,
			resources: []string{
				"changed ConfigMap agents/support-workspace-egress-proxy",
				"changed Deployment agents/support-workspace-sandbox",
				"changed agents/support-workspace/proxy.json",
			},
			sandbox: Changed,
			policyLines: []string{
				`~ host api.github.com injection: connection github-acme, Secret acme-github-token: header Authorization: "Bearer {{ .token }}" → connection github-acme, Secret acme-github-token: header Authorization: "token {{ .other }}"`,
			},
		},
		"a host added": {
			head: with(t, with(t, base, "connection.yaml", "hosts: [api.github.com, github.com]", "hosts: [api.github.com, github.com, uploads.github.com]"),
				"connection.yaml", "      - hosts: [github.com]\n", "      - hosts: [uploads.github.com]\n        header: Authorization\n        value: \"Bearer {{ .token }}\"\n      - hosts: [github.com]\n"),
			changed: true,
			sandbox: Changed,
			policyLines: []string{
				`+ host uploads.github.com (connection github-acme, Secret acme-github-token: header Authorization: "Bearer {{ .token }}")`,
				"+ rule on uploads.github.com: " + AnyRequest,
			},
		},
		"the binding moved to another runtime": {
			head: func() map[string]string {
				h := with(t, base, "agentruntime.yaml", "connections:\n      - {sandbox: workspace, role: vcs, connection: github-acme}\n", "connections: []\n")
				// The same AgentRuntime, by another name.
				other := strings.Replace(acme()["agentruntime.yaml"], "{name: support, namespace: agents}", "{name: other, namespace: agents}", 1)
				return with(t, h, "other.yaml", "", other)
			}(),
			changed: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			b := renderSide(t, "base", base)
			h := renderSide(t, "head", tc.head)
			r := Compare(b, h)
			if r.Changed() != tc.changed {
				t.Fatalf("Changed() = %v, want %v: %+v", r.Changed(), tc.changed, r.Resources)
			}
			if tc.resources != nil {
				var got []string
				for _, res := range r.Resources {
					got = append(got, string(res.Change)+" "+res.ID())
				}
				if !slices.Equal(got, tc.resources) {
					t.Errorf("resources:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.resources, "\n"))
				}
			}
			if tc.sandbox != "" {
				if len(r.Sandboxes) != 1 || r.Sandboxes[0].Change != tc.sandbox || r.Sandboxes[0].ID() != "agents/support-workspace" {
					t.Fatalf("sandboxes = %+v, want agents/support-workspace %s", r.Sandboxes, tc.sandbox)
				}
				if got := policyLines(r.Sandboxes[0]); !slices.Equal(got, tc.policyLines) {
					t.Errorf("policy:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.policyLines, "\n"))
				}
			}
			out := allFormats(t, r)
			for f, text := range out {
				if strings.Contains(text, canary) {
					t.Errorf("%s report holds the canary", f)
				}
			}
			if !tc.changed {
				if !strings.HasPrefix(out[FormatText], "keyhole diff: no changes between base and head\n") {
					t.Errorf("text report of no change:\n%s", out[FormatText])
				}
				return
			}
			// Every resource's diff takes base's bytes to head's.
			bf, hf := files(b), files(h)
			for _, res := range r.Resources {
				got, err := apply(bf[res.BasePath], res.Diff)
				if err != nil || got != hf[res.HeadPath] {
					t.Errorf("%s: applying its diff: %v", res.ID(), err)
				}
			}
		})
	}
}

func files(s Side) map[string]string {
	out := map[string]string{"": ""}
	for _, f := range s.Files {
		out[f.Path] = string(f.Data)
	}
	return out
}

// TestCompareSandboxRemoved: removing a sandbox removes its resources
// and every host it reached; adding one adds them.
func TestCompareSandboxRemoved(t *testing.T) {
	base := acme()
	head := with(t, base, "agentruntime.yaml", "name: support,", "name: helpdesk,")
	r := Compare(renderSide(t, "base", base), renderSide(t, "head", head))
	if len(r.Sandboxes) != 2 {
		t.Fatalf("sandboxes = %+v, want support-workspace removed and helpdesk-workspace added", r.Sandboxes)
	}
	added, removed := r.Sandboxes[0], r.Sandboxes[1]
	if added.ID() != "agents/helpdesk-workspace" || added.Change != Added || removed.ID() != "agents/support-workspace" || removed.Change != Removed {
		t.Fatalf("sandboxes = %+v", r.Sandboxes)
	}
	var hosts []string
	for _, h := range removed.Hosts {
		hosts = append(hosts, string(h.Change)+" "+h.Host)
	}
	if want := []string{"removed api.github.com", "removed github.com"}; !slices.Equal(hosts, want) {
		t.Errorf("removed sandbox's hosts = %v, want %v", hosts, want)
	}
	if !slices.Equal(removed.EnvRemoved, []string{"GH_TOKEN=omnia-injected-github-acme"}) {
		t.Errorf("removed sandbox's env = %v", removed.EnvRemoved)
	}
	if r.Count(Added) == 0 || r.Count(Added) != r.Count(Removed) || r.Count(Changed) != 1 {
		t.Errorf("added %d, removed %d, changed %d: want as many added as removed, and the kustomization changed", r.Count(Added), r.Count(Removed), r.Count(Changed))
	}
}

// TestObjectIdentity: an object is matched by apiVersion, kind, namespace
// and name, not by path; other files by path.
func TestObjectIdentity(t *testing.T) {
	cm := func(data string) []byte {
		return []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: ns\ndata:\n  k: " + data + "\n")
	}
	for name, tc := range map[string]struct {
		base, head []render.File
		want       []string // Change + " " + ID + " " + BasePath + " → " + HeadPath
	}{
		"moved, same bytes: no change": {
			base: []render.File{{Path: "a/cm.yaml", Data: cm("1")}},
			head: []render.File{{Path: "b/cm.yaml", Data: cm("1")}},
		},
		"moved and changed: one change with both paths": {
			base: []render.File{{Path: "a/cm.yaml", Data: cm("1")}},
			head: []render.File{{Path: "b/cm.yaml", Data: cm("2")}},
			want: []string{"changed ConfigMap ns/x a/cm.yaml → b/cm.yaml"},
		},
		"a plain file moved is removed and added": {
			base: []render.File{{Path: "a/env.json", Data: []byte("{}\n")}},
			head: []render.File{{Path: "b/env.json", Data: []byte("{}\n")}},
			want: []string{"removed a/env.json a/env.json → ", "added b/env.json  → b/env.json"},
		},
		"same path, another object: removed and added": {
			base: []render.File{{Path: "cm.yaml", Data: cm("1")}},
			head: []render.File{{Path: "cm.yaml", Data: bytes.Replace(cm("1"), []byte("name: x"), []byte("name: y"), 1)}},
			want: []string{"removed ConfigMap ns/x cm.yaml → ", "added ConfigMap ns/y  → cm.yaml"},
		},
		"a YAML file that does not parse is a file": {
			base: []render.File{{Path: "x.yaml", Data: []byte("a: [\n")}},
			head: []render.File{{Path: "x.yaml", Data: []byte("a: []\n")}},
			want: []string{"changed x.yaml x.yaml → x.yaml"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := Compare(Side{Files: tc.base}, Side{Files: tc.head})
			var got []string
			for _, res := range r.Resources {
				got = append(got, string(res.Change)+" "+res.ID()+" "+res.BasePath+" → "+res.HeadPath)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestDeterministic: the order of the input files and of the sandboxes
// does not change a byte of any report.
func TestDeterministic(t *testing.T) {
	base := renderSide(t, "base", acme())
	head := renderSide(t, "head", with(t, acme(), "agentruntime.yaml", "name: support,", "name: helpdesk,"))
	want := allFormats(t, Compare(base, head))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5 {
		b, h := base, head
		b.Files, h.Files = slices.Clone(b.Files), slices.Clone(h.Files)
		rng.Shuffle(len(b.Files), func(i, j int) { b.Files[i], b.Files[j] = b.Files[j], b.Files[i] })
		rng.Shuffle(len(h.Files), func(i, j int) { h.Files[i], h.Files[j] = h.Files[j], h.Files[i] })
		got := allFormats(t, Compare(b, h))
		for f := range want {
			if got[f] != want[f] {
				t.Fatalf("%s report changed with the input order", f)
			}
		}
	}
}

// TestJSONReport: the JSON report follows its documented schema.
func TestJSONReport(t *testing.T) {
	head := with(t, acme(), "connection.yaml", "pathPrefixes: [/repos/acme/widgets]", "pathPrefixes: [/repos/acme/widgets, /repos/acme/gadgets]")
	r := Compare(renderSide(t, "main", acme()), renderSide(t, "head", head))
	var b bytes.Buffer
	if err := Write(&b, FormatJSON, r); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Version string `json:"version"`
		Base    Ref    `json:"base"`
		Changed bool   `json:"changed"`
		Summary struct {
			Changed int         `json:"changed"`
			Kinds   []KindCount `json:"kinds"`
		} `json:"summary"`
		Sandboxes []struct {
			Namespace, Name string
			Hosts           []struct {
				Host         string   `json:"host"`
				RulesAdded   []string `json:"rulesAdded"`
				RulesRemoved []string `json:"rulesRemoved"`
			} `json:"hosts"`
		} `json:"sandboxes"`
		Resources []struct {
			Change   string `json:"change"`
			Kind     string `json:"kind"`
			HeadPath string `json:"headPath"`
			Diff     string `json:"diff"`
		} `json:"resources"`
	}
	dec := json.NewDecoder(&b)
	dec.DisallowUnknownFields()
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Version != JSONVersion || got.Base.Name != "main" || !got.Changed || got.Summary.Changed != 2 || len(got.Summary.Kinds) != 2 {
		t.Errorf("report head = %+v", got)
	}
	if len(got.Sandboxes) != 1 || len(got.Sandboxes[0].Hosts) != 1 || got.Sandboxes[0].Hosts[0].Host != "api.github.com" ||
		!slices.Equal(got.Sandboxes[0].Hosts[0].RulesAdded, []string{"GET,HEAD /repos/acme/widgets, /repos/acme/gadgets"}) {
		t.Errorf("sandboxes = %+v", got.Sandboxes)
	}
	if len(got.Resources) != 2 || !strings.Contains(got.Resources[0].Diff, "+") {
		t.Errorf("resources = %+v", got.Resources)
	}
	var none bytes.Buffer
	if err := Write(&none, FormatJSON, Compare(Side{}, Side{})); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(none.String(), `"resources": []`) || !strings.Contains(none.String(), `"changed": false`) {
		t.Errorf("an empty report must list [] and say changed false:\n%s", none.String())
	}
}

// TestMarkdownFences: a diff holding backticks cannot close its fence.
func TestMarkdownFences(t *testing.T) {
	r := Compare(Side{Files: []render.File{{Path: "x.env", Data: []byte("A=1\n")}}},
		Side{Files: []render.File{{Path: "x.env", Data: []byte("A=```\n")}}})
	var b bytes.Buffer
	if err := Write(&b, FormatMarkdown, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "````diff\n") || !strings.Contains(b.String(), "<details><summary>changed <code>x.env</code>") {
		t.Errorf("markdown:\n%s", b.String())
	}
}

func TestWriteUnknownFormat(t *testing.T) {
	err := Write(&bytes.Buffer{}, "yaml", Result{})
	if err == nil || !strings.Contains(err.Error(), "json, markdown, text") {
		t.Fatalf("Write(yaml) = %v, want an error listing the formats", err)
	}
}

// TestMarkdownLimit: a report of many changes stays under GitHub's comment
// limit, keeps its summary whole, and says what it left out.
func TestMarkdownLimit(t *testing.T) {
	var base, head []render.File
	for i := range 2000 {
		p := fmt.Sprintf("ns/s%04d/env.json", i)
		base = append(base, render.File{Path: p, Data: []byte(strings.Repeat("a\n", 50))})
		head = append(head, render.File{Path: p, Data: []byte(strings.Repeat("b\n", 50))})
	}
	var b bytes.Buffer
	if err := Write(&b, FormatMarkdown, Compare(Side{Files: base}, Side{Files: head})); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if len(out) > MarkdownLimit || len(out) < MarkdownDiffBudget {
		t.Errorf("markdown report is %d bytes, want between %d and %d", len(out), MarkdownDiffBudget, MarkdownLimit)
	}
	for _, want := range []string{"| env.json | 0 | 0 | 2000 |", "```diff\n", "Diff omitted to keep this comment", "more resources: run `keyhole diff`"} {
		if !strings.Contains(out, want) {
			t.Errorf("markdown report lacks %q", want)
		}
	}
}

// FuzzCompare: whatever the rendered files hold (YAML or not, objects
// or not, one claiming another's identity), Compare does not panic,
// every resource's diff takes base's bytes to head's, and every format
// writes.
func FuzzCompare(f *testing.F) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  namespace: ns\ndata:\n  k: v\n"
	f.Add(cm, cm, "{}\n", "{\"kind\": \"ProxyConfig\"}\n")
	f.Add(cm, strings.Replace(cm, "v\n", "w\n", 1), "a: [\n", "a: []\n")
	f.Add("", cm, cm, "")
	f.Fuzz(func(t *testing.T, a1, a2, b1, b2 string) {
		base := Side{Files: []render.File{{Path: "a/one.yaml", Data: []byte(a1)}, {Path: "a/two.json", Data: []byte(b1)}}}
		head := Side{Files: []render.File{{Path: "b/one.yaml", Data: []byte(a2)}, {Path: "a/two.json", Data: []byte(b2)}}}
		r := Compare(base, head)
		bf, hf := files(base), files(head)
		for _, res := range r.Resources {
			got, err := apply(bf[res.BasePath], res.Diff)
			if err != nil || got != hf[res.HeadPath] {
				t.Fatalf("%s: applying its diff: %v", res.ID(), err)
			}
		}
		for _, format := range Formats() {
			if err := Write(io.Discard, format, r); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestCompareCarriedOnce: render writes the proxy config twice, as
// proxy.json and in the proxy's ConfigMap; the text and markdown reports
// show the change once, at the ConfigMap, and name it at the file. A file
// whose content no changed ConfigMap carries keeps its own hunk.
func TestCompareCarriedOnce(t *testing.T) {
	cm := func(cfg string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: s-egress-proxy\n  namespace: ns\ndata:\n  proxy.json: |\n    " +
			strings.ReplaceAll(strings.TrimRight(cfg, "\n"), "\n", "\n    ") + "\n"
	}
	const before, after = "{\n  \"hosts\": [\n    \"a\"\n  ]\n}\n", "{\n  \"hosts\": [\n    \"a\",\n    \"b\"\n  ]\n}\n"
	side := func(cfg, env string) Side {
		return Side{Files: []render.File{
			{Path: "s/configmap-s-egress-proxy.yaml", Data: []byte(cm(cfg))},
			{Path: "s/proxy.json", Data: []byte(cfg)},
			{Path: "s/env.json", Data: []byte(env)},
		}}
	}
	res := Compare(side(before, `{"A":"1"}`), side(after, `{"A":"2"}`))
	same := map[string]string{}
	for _, r := range res.Resources {
		same[r.Path()] = r.SameAs
	}
	want := map[string]string{
		"s/configmap-s-egress-proxy.yaml": "",
		"s/proxy.json":                    "ConfigMap ns/s-egress-proxy, data proxy.json",
		"s/env.json":                      "",
	}
	if !maps.Equal(same, want) {
		t.Fatalf("sameAs %q, want %q", same, want)
	}
	for _, format := range []string{"text", "markdown"} {
		var b strings.Builder
		if err := Write(&b, format, res); err != nil {
			t.Fatal(err)
		}
		if n := len(regexp.MustCompile(`(?m)^\+\s+"b"$`).FindAllString(b.String(), -1)); n != 1 {
			t.Errorf("%s: the proxy config's change is shown %d times, want once:\n%s", format, n, b.String())
		}
		if !strings.Contains(b.String(), "the same change as ConfigMap ns/s-egress-proxy, data proxy.json") {
			t.Errorf("%s: proxy.json does not name the ConfigMap:\n%s", format, b.String())
		}
		if !strings.Contains(b.String(), `+{"A":"2"}`) {
			t.Errorf("%s: env.json's own change is missing:\n%s", format, b.String())
		}
	}
}

// TestCompareInternalAddresses: a Connection's allowInternalAddresses has
// the proxy dial its hosts at the metadata address, loopback and private
// ranges; diff calls that a widening, with a witness at the metadata
// address, and trips --fail-on widened; taking it away narrows.
func TestCompareInternalAddresses(t *testing.T) {
	base := acme()
	head := with(t, base, "connection.yaml", "  hosts: [api.github.com, github.com]\n", "  hosts: [api.github.com, github.com]\n  allowInternalAddresses: true\n")
	b, h := renderSide(t, "base", base), renderSide(t, "head", head)
	r := Compare(b, h)
	if len(r.Sandboxes) != 1 {
		t.Fatalf("sandboxes = %+v, want agents/support-workspace", r.Sandboxes)
	}
	s := r.Sandboxes[0]
	if s.Verdict != VerdictWidened {
		t.Errorf("verdict %s, want widened", s.Verdict)
	}
	if want := []string{"api.github.com", "github.com"}; !slices.Equal(s.InternalAdded, want) {
		t.Errorf("internalAdded %v, want %v", s.InternalAdded, want)
	}
	want := Witness{Method: "GET", URL: "https://api.github.com/repos/acme/widgets", Address: "169.254.169.254",
		Base: Outcome{Action: policy.ActionRefuse, Reason: policy.ReasonHostNotAllowed},
		Head: Outcome{Action: policy.ActionInject, Connection: "github-acme", Credential: describeCredential(bearer("acme-github-token"))},
		Rule: "GET,HEAD /repos/acme/widgets"}
	if !slices.Contains(s.Widened, want) {
		t.Errorf("witnesses %+v, want among them %+v", s.Widened, want)
	}
	if got := r.Tripped([]string{GateWidened}); len(got) != 1 {
		t.Errorf("--fail-on widened trips on %v, want the sandbox", got)
	}
	out := allFormats(t, r)
	for _, f := range []string{FormatText, FormatMarkdown} {
		if !strings.Contains(out[f], "GET https://api.github.com/repos/acme/widgets at 169.254.169.254 (link-local)") ||
			!strings.Contains(out[f], "internal addresses for host api.github.com") {
			t.Errorf("%s report does not show the internal addresses and their witness:\n%s", f, out[f])
		}
	}
	if back := Compare(h, b); len(back.Sandboxes) != 1 || back.Sandboxes[0].Verdict != VerdictNarrowed {
		t.Errorf("taking allowInternalAddresses away: %+v, want narrowed", back.Sandboxes)
	}
}
