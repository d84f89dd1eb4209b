package source

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// kfuzzCanary is the Secret value planted in the tree FuzzKustomize
// builds: in a Secret's stringData and (base64) data, in env files for a
// secretGenerator (and in a YAML file one takes whole), and in
// components' generator literals. A line of a PEM-like multi-line
// value holds its middle, "CANARY-0b7e". No diagnostic may hold any of
// them.
const kfuzzCanary = "kfz-CANARY-0b7e4f1d9a"

// kfuzzCredsFile is a file a secretGenerator may take whole as a value.
const kfuzzCredsFile = "password: " + kfuzzCanary + "\n"

// kfuzzQuotedLiteral is a generator literal's value, written in quotes.
const kfuzzQuotedLiteral = "quoted-CANARY-0b7e-literal"

// kfuzzLoopback in a fuzzed file stands for the address of a loopback
// listener that counts connections: a remote base pointed there would be
// fetched from it, and none may be.
const kfuzzLoopback = "LOOPBACK"

// kfuzzTimeout bounds one Load of the fuzzed tree. A build of these few
// small files takes milliseconds; one that takes seconds is a finding.
const kfuzzTimeout = 5 * time.Second

// kfuzzTree is the fixed part of the tree FuzzKustomize builds: a base
// like examples/kustomize-overlay's (a Connection, a SealedSecret, a
// SandboxClass, an AgentRuntime) plus a Secret and a generator, a base of
// that base, three components, and files the fuzzed overlay k/ may name. The
// fuzzer writes k/kustomization.yaml, k/resource.yaml and k/patch.yaml.
func kfuzzTree() map[string]string {
	b64 := base64.StdEncoding.EncodeToString([]byte(kfuzzCanary))
	return map[string]string{
		"base/kustomization.yaml": "resources:\n  - connection.yaml\n  - sealedsecret.yaml\n  - secret.yaml\n  - sandboxclass.yaml\n  - agentruntime.yaml\n" +
			"configMapGenerator:\n  - name: settings\n    literals: [mode=strict]\n",
		"base/connection.yaml": connection + `        rules:
          - methods: [GET, HEAD]
            pathPrefixes: [/repos/acme/widgets]
      - hosts: [github.com]
        basic:
          usernameKey: user
          passwordKey: token
`,
		"base/sealedsecret.yaml": `apiVersion: bitnami.com/v1alpha1
kind: SealedSecret
metadata:
  name: acme-github-token
  namespace: agents
spec:
  encryptedData:
    user: AgBQ1xEu2Hn0mWcN7yZ+oHk8f3vVr0gTqPz6Lw==
    token: AgCk7Tz2sYbQ9nVx4pLm+eR1uJ0aHf5WdOg3Ki==
`,
		"base/secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: plain-token\n  namespace: agents\n" +
			"stringData:\n  token: " + kfuzzCanary + "\n  pem: |\n    -----BEGIN KEY-----\n    pem-line-CANARY-0b7e-of-a-key\n    -----END KEY-----\n" +
			"data:\n  user: " + b64 + "\n",
		"base/sandboxclass.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: SandboxClass
metadata:
  name: workspace
  namespace: agents
spec:
  image: ghcr.io/acme/agent-workspace:1.4.2
  connections:
    - role: vcs
      description: source control the agent's code may read
`,
		"base/agentruntime.yaml": `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata:
  name: support
  namespace: agents
spec:
  sandbox:
    enabled: true
    connections:
      - {sandbox: workspace, role: vcs, connection: github-acme}
`,
		"mid/kustomization.yaml": "namePrefix: mid-\nresources:\n  - ../base\nlabels:\n  - pairs: {tier: agents}\n    includeSelectors: false\n",
		"comp/kustomization.yaml": `apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
patches:
  - target: {kind: SandboxClass}
    patch: |-
      - op: replace
        path: /spec/image
        value: ghcr.io/acme/agent-workspace:2.0.0
`,
		// A component whose invalid literal (a Secret value holding a
		// quote) kustomize quotes, and wraps with %q.
		"qcomp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nsecretGenerator:\n  - name: q\n" +
			"    literals: ['say\"" + kfuzzCanary + "']\n",
		"k/kustomizeconfig.yaml": `nameReference:
  - kind: Connection
    fieldSpecs:
      - kind: AgentRuntime
        path: spec/sandbox/connections/connection
  - kind: Secret
    fieldSpecs:
      - kind: Connection
        path: spec/credential/secretRef/name
`,
		"k/hosts.json6902.yaml": "- op: replace\n  path: /spec/hosts/0\n  value: api.github.example\n",
		"k/app.env":             "token=" + kfuzzCanary + "\nuser=bot\n",
		// A component whose literal kustomize stores without its quotes.
		"lcomp/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nsecretGenerator:\n  - name: l\n" +
			"    options: {disableNameSuffixHash: true}\n    literals: ['pass=\"" + kfuzzQuotedLiteral + "\"']\n",
		// A secretGenerator's files: source, a YAML mapping whose whole
		// content (in base64) is the Secret value.
		"k/creds.yaml": kfuzzCredsFile,
		// kustomize's error about a line that is not UTF-8 quotes the line.
		"k/invalid.env": "token=" + kfuzzCanary + "\xff\n",
	}
}

// kfuzzSeed is one overlay of the seed corpus: the files the fuzzer
// writes in k/.
type kfuzzSeed struct{ name, kust, resource, patch string }

// kfuzzSeeds are realistic overlays: each a kustomization, a resource
// and a patch file for k/.
func kfuzzSeeds() []kfuzzSeed {
	const connection = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata:\n  name: extra\nspec:\n  hosts: [api.example.com]\n" +
		"  credential: {kind: secret, secretRef: {name: extra-token}}\n"
	const strategic = "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata:\n  name: github-acme\n  namespace: agents\nspec:\n  placement:\n    inject:\n" +
		"      - hosts: [api.github.com]\n        header: Authorization\n        value: \"token {{ .token }}\"\n"
	const json6902 = "- op: add\n  path: /spec/hosts/-\n  value: gist.github.com\n- op: replace\n  path: /spec/credential/secretRef/name\n  value: other\n"
	return []kfuzzSeed{
		{
			name:     "prefix and namespace over a base",
			kust:     "namePrefix: prod-\nnamespace: agents-prod\nresources:\n  - ../base\n  - resource.yaml\nconfigurations:\n  - kustomizeconfig.yaml\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name: "strategic and JSON 6902 patches",
			kust: "resources: [../base]\npatches:\n  - path: patch.yaml\n  - path: hosts.json6902.yaml\n    target: {kind: Connection, name: github-acme}\n" +
				"  - target: {kind: Connection}\n    patch: |-\n      - op: replace\n        path: /spec/hosts/1\n        value: gist.github.com\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name: "inline strategic patches that match nothing, literal and flow",
			kust: "resources: [../base]\npatches:\n  - patch: |-\n      apiVersion: omnia.altairalabs.ai/v1alpha1\n      kind: Connection\n      metadata:\n        name: nowhere\n" +
				"  - patch: '{kind: Connection, metadata: {name: \"gone\"}}'\npatchesStrategicMerge:\n  - |\n    kind: Connection\n    metadata: {name: lost}\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "JSON 6902 patch file with a target",
			kust:     "resources: [../base, resource.yaml]\npatchesJson6902:\n  - path: patch.yaml\n    target: {group: omnia.altairalabs.ai, version: v1alpha1, kind: Connection, name: extra}\n",
			resource: connection,
			patch:    json6902,
		},
		{
			name:     "legacy patchesStrategicMerge",
			kust:     "bases: [../base]\npatchesStrategicMerge: [patch.yaml]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "base of a base",
			kust:     "namePrefix: prod-\nresources: [../mid]\ncommonLabels: {env: prod}\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name: "generators",
			kust: "resources: [resource.yaml]\ngeneratorOptions: {disableNameSuffixHash: false}\nsecretGenerator:\n  - name: acme-github-token\n    envs: [app.env]\n" +
				"  - name: literal\n    literals: [password=hunter2-but-longer]\n    type: Opaque\nconfigMapGenerator:\n  - name: cfg\n    files: [patch.yaml]\n",
			resource: connection,
			patch:    "key: value\n",
		},
		{
			name: "replacements",
			kust: "resources: [../base]\nreplacements:\n  - source: {kind: SandboxClass, name: workspace, fieldPath: metadata.name}\n" +
				"    targets:\n      - select: {kind: AgentRuntime}\n        fieldPaths: [spec.sandbox.connections.0.sandbox]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name: "replacement reading a Secret value",
			kust: "resources: [../base]\nreplacements:\n  - source: {kind: Secret, name: plain-token, fieldPath: stringData.token}\n" +
				"    targets:\n      - select: {kind: Connection}\n        fieldPaths: [spec.hosts.5.x]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "component and images",
			kust:     "resources: [../base]\ncomponents: [../comp]\nimages:\n  - name: ghcr.io/acme/agent-workspace\n    newTag: 1.5.0\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "labels and annotations",
			kust:     "resources: [../base, resource.yaml]\nlabels:\n  - pairs: {team: acme}\n    includeSelectors: true\ncommonAnnotations: {owner: acme}\nnameSuffix: -v2\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "resource file holding a Secret",
			kust:     "resources: [resource.yaml]\n",
			resource: "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {token: abcdefgh-literal}\n---\n" + connection,
			patch:    strategic,
		},
		{
			name:     "remote resource on loopback",
			kust:     "resources:\n  - resource.yaml\n  - http://" + kfuzzLoopback + "/cm.yaml\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "remote git base on loopback",
			kust:     "resources:\n  - ../base\n  - git::http://" + kfuzzLoopback + "/acme/base.git//deploy?ref=v1\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "remote patch on loopback",
			kust:     "resources: [../base]\npatches:\n  - path: https://" + kfuzzLoopback + "/p.yaml\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "missing resource",
			kust:     "resources:\n  - resource.yaml\n  - missing.yaml\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "env file as a resource",
			kust:     "resources: [app.env]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "JSON 6902 test of a Secret value",
			kust:     "resources: [../base]\npatches:\n  - path: patch.yaml\n    target: {kind: Secret, name: plain-token}\n",
			resource: connection,
			patch:    "- op: test\n  path: /stringData/token\n  value: not-the-value\n- op: replace\n  path: /stringData/missing\n  value: x\n",
		},
		{
			name:     "patch file of several documents and directives",
			kust:     "resources: [../base, resource.yaml]\npatches:\n  - path: patch.yaml\n  - target: {labelSelector: app=x, annotationSelector: a=b}\n    patch: |-\n      $patch: delete\n      kind: Connection\n      metadata: {name: any}\n",
			resource: connection,
			patch: strategic + "---\napiVersion: omnia.altairalabs.ai/v1alpha1\nkind: SandboxClass\nmetadata: {name: workspace, namespace: agents}\nspec:\n  $patch: replace\n  image: x\n" +
				"---\napiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: extra}\n$patch: delete\n",
		},
		{
			name:     "JSON 6902 paths with escapes and indices",
			kust:     "resources: [resource.yaml]\npatches:\n  - path: patch.yaml\n    target: {kind: Connection}\n",
			resource: connection,
			patch: "- op: add\n  path: /metadata/annotations\n  value: {a~b/c: d}\n- op: add\n  path: /metadata/annotations/x~1y~0z\n  value: w\n" +
				"- op: copy\n  from: /spec/hosts/0\n  path: /spec/hosts/1\n- op: move\n  from: /spec/credential\n  path: /spec/cred\n- op: remove\n  path: /spec/hosts/0\n",
		},
		{
			name: "replacement with create and delimiter",
			kust: "resources: [../base]\nreplacements:\n  - source: {kind: Connection, fieldPath: spec.hosts.0, options: {delimiter: '.', index: 1}}\n" +
				"    targets:\n      - select: {kind: SandboxClass}\n        reject: [{name: other}]\n        fieldPaths: [metadata.labels.host, 'spec.connections.[role=vcs].description']\n        options: {create: true}\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "anchors and merge keys in the kustomization",
			kust:     "resources: &c\n  - ../base\nlabels:\n  - &l {pairs: {a: b}}\n  - <<: *l\n    includeTemplates: true\nbuildMetadata: [managedByLabel]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "resource with a BOM, CRLF and a List",
			kust:     "resources: [resource.yaml]\nnamespace: ns\nnameSuffix: -x\n",
			resource: "\uFEFFapiVersion: v1\r\nkind: ConfigMapList\r\nitems:\r\n  - apiVersion: v1\r\n    kind: ConfigMap\r\n    metadata: {name: a}\r\n    data: {k: v}\r\n",
			patch:    strategic,
		},
		{
			name:     "generators reading files across the root",
			kust:     "secretGenerator:\n  - name: s\n    files: [token=../base/secret.yaml]\nconfigMapGenerator:\n  - name: c\n    envs: [app.env]\n    behavior: create\n    options: {labels: {a: b}}\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "builtin transformer configuration",
			kust:     "resources: [resource.yaml]\ntransformers: [patch.yaml]\nsortOptions: {order: legacy}\n",
			resource: connection,
			patch:    "apiVersion: builtin\nkind: PrefixSuffixTransformer\nmetadata: {name: ps}\nprefix: t-\nfieldSpecs: [{path: metadata/name}]\n",
		},
		{
			name:     "component that is not one",
			kust:     "resources: [resource.yaml]\ncomponents: [../mid, ../comp]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "env file line that is not UTF-8",
			kust:     "resources: [resource.yaml]\nsecretGenerator:\n  - name: env\n    envs: [invalid.env]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "component quoting a Secret literal with %q",
			kust:     "resources: [resource.yaml]\ncomponents: [../qcomp]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name: "replacement printing a multi-line Secret value as node contents",
			kust: "resources: [../base]\nreplacements:\n  - source: {kind: Secret, name: plain-token, fieldPath: metadata.name}\n" +
				"    targets:\n      - select: {kind: Secret, name: plain-token}\n        fieldPaths: [stringData.pem.sub]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name: "generator file source printed in base64",
			kust: "secretGenerator:\n  - name: g\n    options: {disableNameSuffixHash: true}\n    files: [creds=creds.yaml]\n" +
				"replacements:\n  - source: {kind: Secret, name: g, fieldPath: metadata.name}\n    targets:\n      - select: {kind: Secret}\n        fieldPaths: [data.creds.sub]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name: "quoted literal printed in base64",
			kust: "resources: [resource.yaml]\ncomponents: [../lcomp]\n" +
				"replacements:\n  - source: {kind: Secret, name: l, fieldPath: metadata.name}\n    targets:\n      - select: {kind: Secret}\n        fieldPaths: [data.pass.sub]\n",
			resource: connection,
			patch:    strategic,
		},
		{
			name:     "not a mapping",
			kust:     "- resources\n",
			resource: "- a\n",
			patch:    "",
		},
	}
}

// FuzzKustomize mutates the kustomization (and one resource and one
// patch file) of an overlay over a realistic tree, and checks what Load
// promises for a kustomize directory, whatever the kustomization says:
// it returns (no panic in kustomize or in keyhole's mapping of the build
// back to files) within kfuzzTimeout; every diagnostic, and every
// position of a built document, is inside the file it names; the tree is
// left as it was; no Secret value of the tree, and no absolute path, is
// in any message; nothing is fetched (remote bases are not allowed);
// and two loads agree.
func FuzzKustomize(f *testing.F) {
	for _, s := range kfuzzSeeds() {
		f.Add([]byte(s.kust), []byte(s.resource), []byte(s.patch))
	}
	var conns atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	// A fetch of any other host goes through the listener too.
	for _, v := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"} {
		f.Setenv(v, "http://"+addr)
	}
	f.Setenv("NO_PROXY", "")
	f.Setenv("no_proxy", "")
	b64Canary := base64.StdEncoding.EncodeToString([]byte(kfuzzCanary))
	// The forms a message could hold the canary in: plain, base64, and
	// (of a fragment, for a partial quote) as Go prints a []byte and as
	// hex.
	fragment := []byte("CANARY-0b7e")
	canaryForms := []string{kfuzzCanary, b64Canary, string(fragment), b64Canary[:16],
		strings.Trim(fmt.Sprint(fragment), "[]"), fmt.Sprintf("%x", fragment),
		base64.StdEncoding.EncodeToString([]byte(kfuzzCredsFile)), base64.StdEncoding.EncodeToString([]byte(kfuzzQuotedLiteral))}

	// The fixed tree is written once (per fuzzing process); each input
	// overwrites the three files it owns. Were Load to write anywhere in
	// the tree, the snapshot check below would fail on that input.
	dir := f.TempDir()
	files := kfuzzTree()
	writeFiles(f, dir, files)

	f.Fuzz(func(t *testing.T, kust, resource, patch []byte) {
		writeFiles(t, dir, map[string]string{
			"k/kustomization.yaml": strings.ReplaceAll(string(kust), kfuzzLoopback, addr),
			"k/resource.yaml":      strings.ReplaceAll(string(resource), kfuzzLoopback, addr),
			"k/patch.yaml":         strings.ReplaceAll(string(patch), kfuzzLoopback, addr),
		})
		before := snapshot(t, dir)
		before0 := conns.Load()

		first := kfuzzLoad(t, dir)
		if n := conns.Load() - before0; n != 0 {
			t.Fatalf("%d connections reached the loopback listener with remote bases not allowed", n)
		}
		if after := snapshot(t, dir); !reflect.DeepEqual(before, after) {
			t.Fatalf("Load changed the tree:\nbefore %q\nafter  %q", before, after)
		}
		// The canary may be quoted when the fuzzer wrote it outside a
		// Secret; only a tree whose fuzzed files lack it is checked.
		fuzzed := string(kust) + string(resource) + string(patch)
		checkCanary := !strings.Contains(fuzzed, "CANARY") && !strings.Contains(fuzzed, b64Canary[:12])
		for _, m := range first.messages {
			// Paths are shown as the user would type them (scrub), the
			// same on every machine: never the temporary directory.
			if strings.Contains(m, dir) {
				t.Fatalf("a diagnostic holds the absolute path of the tree: %s", m)
			}
			for _, marker := range []string{"fetch --depth", "failed to run '", "git clone", "timeout running", "dial tcp", "proxyconnect"} {
				if strings.Contains(m, marker) {
					t.Fatalf("a diagnostic shows a fetch was attempted (%q): %s", marker, m)
				}
			}
			if checkCanary {
				for _, form := range canaryForms {
					if strings.Contains(m, form) {
						t.Fatalf("a diagnostic quotes the Secret value (%q): %s", form, m)
					}
				}
			}
		}
		for _, p := range first.positions {
			checkPos(t, dir, p.what, p.file, p.line, p.col)
		}
		second := kfuzzLoad(t, dir)
		if !reflect.DeepEqual(first.messages, second.messages) || !reflect.DeepEqual(first.docs, second.docs) {
			t.Fatalf("two loads differ:\n%q\n%q\n%q\n%q", first.messages, second.messages, first.docs, second.docs)
		}
	})
}

// kfuzzResult is what one Load of the fuzzed tree gave, as plain values.
type kfuzzResult struct {
	messages  []string // every diagnostic, as printed
	docs      []string // every document: file, position and YAML
	positions []kfuzzPos
}

// kfuzzPos is a position Load reported, and what it is the position of.
type kfuzzPos struct {
	what      string
	file      string
	line, col int
}

// kfuzzLoad loads k/ under dir in a goroutine, failing when it panics or
// takes longer than kfuzzTimeout.
func kfuzzLoad(t *testing.T, dir string) kfuzzResult {
	t.Helper()
	type outcome struct {
		res   kfuzzResult
		err   error
		panic any
	}
	done := make(chan outcome, 1)
	go func() {
		var o outcome
		defer func() {
			if r := recover(); r != nil {
				o.panic = r
			}
			done <- o
		}()
		docs, ds, err := testLoad([]string{"k"}, Options{Dir: dir, Stdin: strings.NewReader(""), MaxFileSize: 1 << 20})
		if err != nil {
			o.err = fmt.Errorf("Load: %w", err)
			return
		}
		for _, d := range ds {
			o.res.messages = append(o.res.messages, d.String())
			o.res.positions = append(o.res.positions, kfuzzPos{what: "diagnostic " + d.String(), file: d.Pos.File, line: d.Pos.Line, col: d.Pos.Column})
		}
		for _, d := range docs {
			o.res.positions = append(o.res.positions, kfuzzPos{what: "document " + d.File, file: d.Pos.File, line: d.Pos.Line, col: d.Pos.Column})
			d.Object()
			var walk func(n *yaml.Node)
			walk = func(n *yaml.Node) {
				p, _ := d.Where(n)
				o.res.positions = append(o.res.positions, kfuzzPos{what: "node " + n.Value + " of " + d.File, file: p.File, line: p.Line, col: p.Column})
				for _, c := range n.Content {
					walk(c)
				}
			}
			walk(d.Node)
			y, err := yaml.Marshal(d.Node)
			if err != nil {
				o.err = fmt.Errorf("a built document does not marshal: %w", err)
				return
			}
			o.res.docs = append(o.res.docs, d.File+" @"+d.Pos.String()+"\n"+string(y))
		}
	}()
	select {
	case o := <-done:
		if o.panic != nil {
			t.Fatalf("Load panicked: %v", o.panic)
		}
		if o.err != nil {
			t.Fatal(o.err)
		}
		return o.res
	case <-time.After(kfuzzTimeout):
		t.Fatalf("Load took longer than %v", kfuzzTimeout)
	}
	return kfuzzResult{}
}

// checkPos fails when a position is not at line and column 1 or more, or
// is past the end of the file it names (when that file exists).
func checkPos(t *testing.T, dir, what, file string, line, col int) {
	t.Helper()
	if line < 1 || col < 1 {
		t.Fatalf("%s at %s:%d:%d: not a position", what, file, line, col)
	}
	data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
	if err != nil {
		return
	}
	// An upper bound on the lines yaml.v3 counts (see FuzzLoad).
	lines := 1 + bytes.Count(data, []byte("\n")) + bytes.Count(data, []byte("\r")) +
		bytes.Count(data, []byte("\u0085")) + bytes.Count(data, []byte("\u2028")) + bytes.Count(data, []byte("\u2029"))
	if line > lines {
		t.Fatalf("%s at %s:%d:%d: the file has %d lines", what, file, line, col, lines)
	}
}

// snapshot returns every file and directory under dir with its mode and
// contents, to tell whether anything wrote to the tree.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		v := fi.Mode().String()
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(data)
		}
		out[p] = v
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
