package source

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
)

// TestScope: what a walk finds that is not about keyhole's objects is
// skipped with one InputSkipped note; what names keyhole's kinds, and
// anything named explicitly, is still an error.
func TestScope(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
	tree := map[string]string{
		// A Helm chart whose templates name a Connection: rendered, and
		// its broken template is an error at its Chart.yaml.
		"charts/web/Chart.yaml":                "apiVersion: v2\nname: web\nversion: 1.0.0\n",
		"charts/web/values.yaml":               "replicas: 1\n",
		"charts/web/templates/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ include \"web.fullname\" . }}\n{{- if .Values.x }}\n",
		"charts/web/templates/connection.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata:\n  name: {{ .Release.Name }}\n",
		// Templated YAML outside a chart, and a docs snippet in Jinja.
		"docs/snippet.yaml":     "{% raw %}\napiVersion: v1\nkind: ConfigMap\n{% endraw %}\n",
		"docs/helm-values.yaml": "image: {{ .Values.image }}\n",
		// Other tools' YAML and JSON.
		"site/config.yaml":         "title: a\ntitle: b\n",
		"testdata/array.json":      "[1, 2, 3]\n",
		"testdata/scalar.yaml":     "just text\n",
		"testdata/index.yaml":      "apiVersion: v1\nentries: {}\n",
		"testdata/latin1.yaml":     "a: caf\xe9\n",
		"other/chartlike/app.yaml": cm,
		// keyhole's own files with mistakes: errors.
		"agents/broken.yaml":   "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: [\n",
		"agents/nokind.yaml":   "kind: SandboxClass\nmetadata: {name: x}\n",
		"agents/template.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c}\nspec:\n  placement:\n    inject:\n      - value: \"Bearer {{ .token }}\"\n        header: [\n",
		// A kustomization another tool owns that keyhole cannot build.
		"legacy/kustomization.yaml": "resources: [cm.yaml]\npatches:\n  - patch.yaml\n",
		"legacy/cm.yaml":            cm,
		// The same mistake in a kustomization that holds a Connection.
		"mine/kustomization.yaml": "resources: [c.yaml]\npatches:\n  - patch.yaml\n",
		"mine/c.yaml":             "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: x}\nspec: {image: a}\n",
		// A Flux Kustomization saved as kustomization.yaml is not built,
		// and its directory is walked.
		"flux/kustomization.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\nspec: {path: ./apps}\n",
		"flux/other.yaml":         cm,
		// A kustomization of other objects that builds: not built at
		// all, said once.
		"apps/web/kustomization.yaml": "resources: [cm.yaml]\n",
		"apps/web/cm.yaml":            cm,
		// A kustomization that does not build, with a stray one in a
		// subdirectory its build never reads, naming a path above the
		// repository: said once, as the others' (the build reads no
		// such path); the stray one's own build says where the path is.
		"hub/kustomization.yaml":       "resources: [cm.yaml]\npatches:\n  - patch.yaml\n",
		"hub/cm.yaml":                  cm,
		"hub/stray/kustomization.yaml": "resources:\n  - ../../../../elsewhere\n",
		// One whose own build names such a path: its build says where.
		"far/kustomization.yaml": "resources:\n  - ../../elsewhere\n",
		// A kustomization whose base holds the keyhole object.
		"overlay/kustomization.yaml": "resources: [../base]\npatches:\n  - p.yaml\n",
		"base/kustomization.yaml":    "resources: [c.yaml]\n",
		"base/c.yaml":                "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: y}\nspec: {image: a}\n",
	}
	dir := t.TempDir()
	writeFiles(t, dir, tree)

	t.Run("walked", func(t *testing.T) {
		docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"agents/broken.yaml:3:1":          "error YAMLInvalid",
			"agents/nokind.yaml:1:1":          "error KindMissing",
			"agents/template.yaml:8:1":        "error YAMLInvalid",
			"charts/web/Chart.yaml:1:1":       "error HelmRenderFailed",
			"docs/helm-values.yaml:1:1":       "info InputSkipped",
			"docs/snippet.yaml:1:1":           "info InputSkipped",
			"legacy/kustomization.yaml:1:1":   "info InputSkipped",
			"hub/kustomization.yaml:1:1":      "info InputSkipped",
			"far/kustomization.yaml:2:5":      "error KustomizeBuildFailed",
			"apps/web/kustomization.yaml:1:1": "info InputSkipped",
			"mine/kustomization.yaml:3:5":     "error KustomizeBuildFailed",
			"overlay/kustomization.yaml:3:5":  "error KustomizeBuildFailed",
			"site/config.yaml:2:1":            "info InputSkipped",
			"testdata/array.json:1:1":         "info InputSkipped",
			"testdata/index.yaml:1:1":         "info InputSkipped",
			"testdata/latin1.yaml:1:7":        "info InputSkipped",
			"testdata/scalar.yaml:1:1":        "info InputSkipped",
		}
		got := map[string]string{}
		for _, d := range ds {
			got[d.Pos.String()] = d.Severity.String() + " " + d.Code
		}
		for pos, w := range want {
			if got[pos] != w {
				t.Errorf("%s: got %q, want %q", pos, got[pos], w)
			}
		}
		for pos, g := range got {
			if _, ok := want[pos]; !ok {
				t.Errorf("unexpected %s %s", pos, g)
			}
		}
		if ids := docIDs(docs); !slices.Equal(ids, []string{"flux/other.yaml#0 ConfigMap/x", "other/chartlike/app.yaml#0 ConfigMap/x"}) {
			t.Errorf("documents: %q", ids)
		}
		for _, d := range ds {
			if d.Code == CodeInputSkipped && !strings.Contains(d.Message, "skipped") {
				t.Errorf("%s: a skip note that does not say so: %s", d.Pos, d.Message)
			}
		}
	})

	// Named explicitly, the same files are errors: the user asked for them.
	named := map[string]string{
		"charts/web":          "error HelmRenderFailed",
		"docs/snippet.yaml":   "error YAMLInvalid",
		"testdata/array.json": "error InputInvalid",
		"site/config.yaml":    "error YAMLInvalid",
		"legacy":              "error KustomizeBuildFailed",
	}
	for p, want := range named {
		t.Run("named "+p, func(t *testing.T) {
			_, ds, err := testLoad([]string{p}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 || ds[0].Severity.String()+" "+ds[0].Code != want {
				t.Errorf("got %v, want one %s", ds, want)
			}
		})
	}
}

func TestTemplated(t *testing.T) {
	tests := map[string]struct {
		data string
		want bool
	}{
		"a key reference is a Connection's value, not a template": {data: `value: "Bearer {{ .token }}"`, want: false},
		"a trimmed key reference":                                 {data: `value: "{{- .token -}}"`, want: false},
		"a Helm value":                                            {data: `image: {{ .Values.image }}`, want: true},
		"a function call":                                         {data: `name: {{ include "x" . }}`, want: true},
		"a control action":                                        {data: "{{- if .x }}\na: b\n{{- end }}", want: true},
		"Jinja":                                                   {data: "{% raw %}\na: b\n", want: true},
		"a Jinja comment":                                         {data: "{# note #}\na: b\n", want: true},
		"plain YAML":                                              {data: "a: b\n", want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := templated([]byte(tc.data)); got != tc.want {
				t.Errorf("templated(%q) = %v, want %v", tc.data, got, tc.want)
			}
		})
	}
}

// TestActionField: a bare {{ }} where an object's identity must be a
// string makes the document a template's; the same action quoted, or
// anywhere else, does not.
func TestActionField(t *testing.T) {
	tests := map[string]string{
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{.Name}}\n":                 "metadata.name",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  namespace: {{ .ns }}\n  name: x\n": "metadata.namespace",
		"apiVersion: {{.Version}}\nkind: X\n":                                             "apiVersion",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: \"{{.Name}}\"\n":             "",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {a: {b: c}}\n":               "",
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  k: {{.Value}}\n": "",
	}
	for data, want := range tests {
		var n yaml.Node
		if err := yaml.Unmarshal([]byte(data), &n); err != nil {
			t.Fatalf("%q: %v", data, err)
		}
		if got, _ := actionField(n.Content[0]); got != want {
			t.Errorf("actionField(%q) = %q, want %q", data, got, want)
		}
	}
}

func TestNamesKeyhole(t *testing.T) {
	tests := map[string]struct {
		name, data string
		want       bool
	}{
		"an omnia object":              {name: "c.yaml", data: "apiVersion: omnia.altairalabs.ai/v1alpha1\n", want: true},
		"an ignore annotation":         {name: "s.yaml", data: "annotations: {keyhole.dev/ignore: X}\n", want: true},
		"the Config's apiVersion":      {name: "k.yaml", data: "apiVersion: keyhole.dev/v1alpha1\n", want: true},
		"a Go module path":             {name: "w.yaml", data: "run: go install keyhole.dev/keyhole/cmd/keyhole@v0.1.0\n", want: false},
		"a keyhole kind without group": {name: "c.yaml", data: "kind: AgentRuntime\n", want: true},
		"in JSON":                      {name: "c.json", data: `{"kind": "Connection"}`, want: true},
		"agent.yaml by name":           {name: "a/agent.yaml", data: "x: [\n", want: true},
		"keyhole.yaml by name":         {name: "keyhole.yaml", data: "", want: true},
		"another kind":                 {name: "d.yaml", data: "kind: Deployment\n", want: false},
		"a kind that contains one":     {name: "d.yaml", data: "kind: ConnectionPool\n", want: false},
		"a word in prose":              {name: "d.yaml", data: "# a Connection here\n", want: false},
		"the value on the next line":   {name: "c.yaml", data: "kind:\n  Connection\n", want: true},
		"blank lines between":          {name: "c.yaml", data: "kind:\n\n\n  'Connection'\n", want: true},
		"the colon on its own line":    {name: "c.json", data: "{\"kind\"\n:\n\"ToolRegistry\"}", want: true},
		"CRLF line ends":               {name: "c.yaml", data: "a: b\r\nkind: SandboxClass\r\n", want: true},
		"in a flow mapping of a list":  {name: "l.yaml", data: "items:\n- {apiVersion: x/v1, kind: Connection, metadata: {name: c}}\n", want: true},
		"after the word in prose":      {name: "d.yaml", data: "# Connection\nkind: Connection # the kind\n", want: true},
		"a comment after":              {name: "d.yaml", data: "x: 1\nkind: AgentRuntime#c\n", want: true},
		"text after the value":         {name: "d.yaml", data: "kind: Connection pool\n", want: false},
		"a key ending in kind":         {name: "d.yaml", data: "subkind: Connection\n", want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := namesKeyhole(tc.name, []byte(tc.data)); got != tc.want {
				t.Errorf("namesKeyhole(%q, %q) = %v, want %v", tc.name, tc.data, got, tc.want)
			}
		})
	}
}

// TestList: the items of a List are objects of their own, at their own
// positions; what is wrong in one item is reported at that item.
func TestList(t *testing.T) {
	tests := map[string]struct {
		data  string
		docs  []string
		diags []string
	}{
		"v1 List": {
			data: "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: Secret\n    metadata: {name: s}\n  - apiVersion: omnia.altairalabs.ai/v1alpha1\n    kind: SandboxClass\n    metadata: {name: c}\n",
			docs: []string{"l.yaml#0 Secret/s@4:5", "l.yaml#0 SandboxClass/c@7:5"},
		},
		"a kind List as kubectl writes it": {
			data: "apiVersion: v1\nkind: SecretList\nitems:\n  - apiVersion: v1\n    kind: Secret\n    metadata: {name: s}\n",
			docs: []string{"l.yaml#0 Secret/s@4:5"},
		},
		"an empty List": {
			data: "apiVersion: v1\nkind: List\nitems: []\n---\napiVersion: v1\nkind: List\nitems:\n",
		},
		"an item without kind": {
			data:  "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    metadata: {name: s}\n",
			diags: []string{"l.yaml:4:5: error KindMissing: item 1 of the List in document 1 has no kind"},
		},
		"an item that is not an object": {
			data:  "apiVersion: v1\nkind: List\nitems:\n  - just text\n",
			diags: []string{"l.yaml:4:5: error InputInvalid: item 1 of the List in document 1 is a scalar"},
		},
		"items that are not a list": {
			data:  "apiVersion: v1\nkind: List\nitems: {a: b}\n",
			diags: []string{"l.yaml:3:8: error InputInvalid: the items of the List in document 1 are not a list"},
		},
		"a List in a List": {
			data: "apiVersion: v1\nkind: List\nitems:\n  - apiVersion: v1\n    kind: List\n    items:\n      - {apiVersion: v1, kind: Secret, metadata: {name: s}}\n",
			docs: []string{"l.yaml#0 Secret/s@7:9"},
		},
		"a KRM function's ResourceList is one object": {
			data: "apiVersion: config.kubernetes.io/v1\nkind: ResourceList\nitems:\n  - {apiVersion: v1, kind: Secret, metadata: {name: s}}\n",
			docs: []string{"l.yaml#0 ResourceList/@1:1"},
		},
		"a kind ending in List without items is an object": {
			data: "apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: a}\n",
			docs: []string{"l.yaml#0 AllowList/a@1:1"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			docs, ds := Parse("l.yaml", []byte(tc.data))
			got := docIDs(docs)
			for i := range got {
				got[i] += "@" + strings.TrimPrefix(docs[i].Pos.String(), "l.yaml:")
			}
			if !slices.Equal(got, tc.docs) {
				t.Errorf("documents %q, want %q", got, tc.docs)
			}
			if len(ds) != len(tc.diags) {
				t.Fatalf("diagnostics %v, want %q", ds, tc.diags)
			}
			for i, d := range ds {
				if !strings.HasPrefix(d.String(), tc.diags[i]) {
					t.Errorf("got %s\nwant %s...", d, tc.diags[i])
				}
			}
		})
	}
}

// TestUnits: each kustomization root is a deploy unit, named after its
// directory; a base that a root uses belongs to it, not to a unit of its
// own; every file outside a kustomization is in the one loose unit.
func TestUnits(t *testing.T) {
	const class = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: c}\nspec: {image: a}\n"
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"apps/base/kustomization.yaml":       "resources: [class.yaml]\n",
		"apps/base/class.yaml":               class,
		"apps/production/kustomization.yaml": "resources: [../base]\nnamespace: prod\n",
		"apps/staging/kustomization.yaml":    "resources: [../base]\nnamespace: staging\n",
		"clusters/a.yaml":                    class,
		"clusters/b/b.yaml":                  strings.Replace(class, "name: c", "name: d", 1),
	})
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil || len(ds) > 0 {
		t.Fatalf("Load: %v %v", ds, err)
	}
	var got []string
	for _, d := range docs {
		o := d.Object()
		got = append(got, d.Unit().Name+" "+o.Namespace+"/"+o.Name+" "+d.File)
	}
	want := []string{
		"apps/production prod/c apps/base/class.yaml",
		"apps/staging staging/c apps/base/class.yaml",
		" /c clusters/a.yaml",
		" /d clusters/b/b.yaml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, d := range docs {
		if !d.Walked() {
			t.Errorf("%s: found by a walk but not marked so", d.File)
		}
	}

	// A build's diagnostics name its unit.
	writeFiles(t, dir, map[string]string{"apps/staging/kustomization.yaml": "resources: [../base, gone.yaml]\n"})
	_, ds, _ = testLoad([]string{"."}, Options{Dir: dir})
	if len(ds) != 1 || !slices.Equal(ds[0].Units, []string{"apps/staging"}) {
		t.Errorf("want one diagnostic of unit apps/staging, got %v (units %v)", ds, unitsOf(ds))
	}
}

func unitsOf(ds diag.List) [][]string {
	var out [][]string
	for _, d := range ds {
		out = append(out, d.Units)
	}
	return out
}

// TestExclude: --exclude and the Config's exclude and include patterns
// choose what a walk reads; a path named explicitly is always read.
func TestExclude(t *testing.T) {
	const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"
	tree := map[string]string{
		"apps/a.yaml":                  cm,
		"apps/fixtures/f.yaml":         cm,
		"docs/d.yaml":                  cm,
		"docs/kust/kustomization.yaml": "resources: [c.yaml]\n",
		"docs/kust/c.yaml":             "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
		"notes (draft)/ü.yaml":         cm,
		// One of keyhole's objects, so that a Secret is worth building for.
		"apps/b.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: x}\nspec: {image: a}\n",
	}
	tests := map[string]struct {
		config  string
		exclude []string
		paths   []string
		want    []string
	}{
		"nothing excluded": {
			want: []string{"apps/a.yaml", "apps/b.yaml", "apps/fixtures/f.yaml", "docs/d.yaml", "docs/kust/c.yaml", "notes (draft)/ü.yaml"},
		},
		"--exclude a directory and a glob": {
			exclude: []string{"docs/", "**/fixtures"},
			want:    []string{"apps/a.yaml", "apps/b.yaml", "notes (draft)/ü.yaml"},
		},
		"--exclude a name with a space": {
			exclude: []string{"notes (draft)"},
			want:    []string{"apps/a.yaml", "apps/b.yaml", "apps/fixtures/f.yaml", "docs/d.yaml", "docs/kust/c.yaml"},
		},
		"keyhole.yaml exclude": {
			config: "exclude: [docs/kust, 'apps/fixtures/']\n",
			want:   []string{"apps/a.yaml", "apps/b.yaml", "docs/d.yaml", "notes (draft)/ü.yaml"},
		},
		"keyhole.yaml include": {
			config: "include: [apps/]\nexclude: [fixtures]\n",
			want:   []string{"apps/a.yaml", "apps/b.yaml"},
		},
		"keyhole.yaml above the path named": {
			config: "exclude: [fixtures]\n",
			paths:  []string{"apps"},
			want:   []string{"apps/a.yaml", "apps/b.yaml"},
		},
		"a path named explicitly is read": {
			exclude: []string{"docs/"},
			paths:   []string{"docs/d.yaml", "apps/a.yaml"},
			want:    []string{"docs/d.yaml", "apps/a.yaml"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tree)
			if tc.config != "" {
				writeFiles(t, dir, map[string]string{"keyhole.yaml": "apiVersion: keyhole.dev/v1alpha1\nkind: Config\n" + tc.config})
			}
			paths := tc.paths
			if paths == nil {
				paths = []string{"."}
			}
			docs, ds, err := testLoad(paths, Options{Dir: dir, Exclude: tc.exclude})
			if err != nil || len(ds) > 0 {
				t.Fatalf("Load: %v %v", ds, err)
			}
			var got []string
			for _, d := range docs {
				if d.Object().Kind == ConfigKind {
					continue
				}
				got = append(got, d.File)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("read %q, want %q", got, tc.want)
			}
		})
	}
}

// TestSecretsBuiltOnlyForConnections: a Secret is checked only for a
// Connection that reads it, so a kustomization a walk finds that only
// declares Secrets is built only when something the Load reads names
// keyhole's kinds: a file or a kustomization under any path it was given,
// or standard input, which cannot be looked at twice. Named explicitly,
// such a kustomization is always built.
func TestSecretsBuiltOnlyForConnections(t *testing.T) {
	tree := map[string]string{
		"infra/kustomization.yaml": "resources: [secret.yaml]\n",
		"infra/secret.yaml":        "apiVersion: v1\nkind: Secret\nmetadata: {name: acme-token}\nstringData: {token: x}\n",
		"infra/cm.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
		"apps/web.yaml":            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: w}\n",
	}
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c}\nspec: {credential: {secretRef: {name: acme-token}}}\n"
	other := strings.ReplaceAll(conn, "acme-token", "other-token")
	const notBuilt = "kustomization not built: it declares Secrets, but nothing keyhole read names keyhole's kinds, so no Connection can read them"
	const notRead = "kustomization not built: the names it gives Secrets (acme-token) are in no file that names keyhole's kinds"
	tests := map[string]struct {
		extra   map[string]string
		exclude []string
		paths   []string
		stdin   string
		built   bool
		unread  bool // not built: no keyhole file names its Secret
	}{
		"nothing of keyhole's":                  {paths: []string{"."}},
		"a Connection in the walk":              {extra: map[string]string{"apps/conn.yaml": conn}, paths: []string{"."}, built: true},
		"a Connection under another path named": {extra: map[string]string{"team/conn.yaml": conn}, paths: []string{"infra", "apps", "team"}, built: true},
		"a Connection in another kustomization": {extra: map[string]string{"k/kustomization.yaml": "resources: [c.yaml]\n", "k/c.yaml": conn}, paths: []string{"."}, built: true},
		"a Connection in a file named":          {extra: map[string]string{"c.yaml": conn}, exclude: []string{"c.yaml"}, paths: []string{".", "c.yaml"}, built: true},
		"a Connection the walk excludes":        {extra: map[string]string{"c.yaml": conn}, exclude: []string{"c.yaml"}, paths: []string{"."}},
		"an agent.yaml alone":                   {extra: map[string]string{"agents/a/agent.yaml": "name: a\n"}, paths: []string{"."}, unread: true},
		"a Connection that reads another":       {extra: map[string]string{"apps/conn.yaml": other}, paths: []string{"."}, unread: true},
		"a patch of a Connection's secretRef": {extra: map[string]string{
			"k/kustomization.yaml": "resources: [c.yaml]\npatches:\n- path: p.yaml\n  target: {kind: Connection}\n", "k/c.yaml": other,
			"k/p.yaml": "- {op: replace, path: /spec/credential/secretRef/name, value: acme-token}\n",
		}, paths: []string{"."}, built: true},
		"standard input":                     {paths: []string{".", "-"}, stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n", built: true},
		"the kustomization named explicitly": {paths: []string{"infra"}, built: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tree)
			writeFiles(t, dir, tc.extra)
			docs, ds, err := testLoad(tc.paths, Options{Dir: dir, Exclude: tc.exclude, Stdin: strings.NewReader(tc.stdin)})
			if err != nil {
				t.Fatal(err)
			}
			built := slices.ContainsFunc(docs, func(d *Document) bool { return d.File == "infra/secret.yaml" })
			note := notBuilt
			if tc.unread {
				note = notRead
			}
			noted := slices.ContainsFunc(ds, func(d diag.Diagnostic) bool { return strings.Contains(d.Message, note) })
			if built != tc.built || noted == tc.built {
				t.Fatalf("Secret built: %v, noted as not built: %v; want built %v\n%v", built, noted, tc.built, ds)
			}
			if !slices.ContainsFunc(docs, func(d *Document) bool { return d.File == "apps/web.yaml" }) && slices.Contains(tc.paths, ".") {
				t.Fatalf("the walk's plain files were not read: %v", docs)
			}
		})
	}
}

func TestDeclaresSecret(t *testing.T) {
	tests := map[string]struct {
		data string
		want bool
	}{
		"a Secret":                   {data: "apiVersion: v1\nkind: Secret\n", want: true},
		"a SealedSecret":             {data: "kind: SealedSecret\n", want: true},
		"an ExternalSecret in JSON":  {data: `{"kind":"ExternalSecret"}`, want: true},
		"a ClusterExternalSecret":    {data: "kind: ClusterExternalSecret\n", want: true},
		"the value on the next line": {data: "kind:\n  SealedSecret\n", want: true},
		"a generator":                {data: "secretGenerator:\n- name: s\n", want: true},
		"a secretKeyRef":             {data: "valueFrom: {secretKeyRef: {name: s, key: k}}\n", want: false},
		"another kind":               {data: "kind: SecretStore\n", want: false},
		"a word in prose":            {data: "description: the Secret to read\n", want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := declaresSecret([]byte(tc.data)); got != tc.want {
				t.Errorf("declaresSecret(%q) = %v, want %v", tc.data, got, tc.want)
			}
		})
	}
}

// FuzzKindField holds the scope checks, which look at the lines around
// each occurrence of a kind's name, to their expressions run over the
// whole file: the same answer on every input.
func FuzzKindField(f *testing.F) {
	for _, s := range []string{
		"kind: Connection\n", "kind:\n\n  'SealedSecret'\n", "{\"kind\"\n:\n\"Secret\"}", "a\r\nkind: ToolRegistry\r\n",
		"- {kind: Secret}", "subkind: Connection", "kind: Connection pool", "# Connection\nkind: AgentRuntime #x",
		"kind :\t\"ExternalSecret\" ,", "kind:Secret", "\"kind\": 'SandboxClass'}", "secretGenerator:",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := kindField(data, keyholeKind, keyholeKindNames), keyholeKind.Match(data); got != want {
			t.Errorf("kindField(%q) = %v; the expression over the whole file says %v", data, got, want)
		}
		if got, want := declaresSecret(data), secretMarkers.Match(data); got != want {
			t.Errorf("declaresSecret(%q) = %v; the expression over the whole file says %v", data, got, want)
		}
	})
}
