package compiler

import (
	"cmp"
	"maps"
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/fixture"
)

func TestRenamedSecret(t *testing.T) {
	tests := map[string]struct {
		secrets []string
		// loose reads the Secrets as loose files, which no
		// kustomization renames.
		loose bool
		// referrer names the Connection; prod-conn-eu when empty.
		referrer string
		want     string
	}{
		"loose files":                         {secrets: []string{"prod-token"}, loose: true},
		"namePrefix":                          {secrets: []string{"prod-token"}, want: "prod-token"},
		"nameSuffix":                          {secrets: []string{"token-eu"}, want: "token-eu"},
		"both":                                {secrets: []string{"prod-token-eu"}, want: "prod-token-eu"},
		"the referrer not renamed":            {secrets: []string{"prod-token"}, referrer: "conn"},
		"another suffix than the referrer's":  {secrets: []string{"token-old"}},
		"generator hash, referrer as written": {secrets: []string{"token-7h2kt9m5fb"}, referrer: "conn", want: "token-7h2kt9m5fb"},
		"generator hash suffix":               {secrets: []string{"token-7h2kt9m5fb"}, want: "token-7h2kt9m5fb"},
		"not at a word boundary":              {secrets: []string{"prodtoken", "tokens"}},
		"several candidates":                  {secrets: []string{"prod-token", "prod-token-eu"}},
		"one the referrer's prefix allows":    {secrets: []string{"prod-token", "dev-token"}, want: "prod-token"},
		"other namespace ignored":             {secrets: nil},
		"the same name is no rename": {
			secrets: []string{"token"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &pass{secrets: map[ref]*secret{{namespace: "other", name: "prod-token"}: {}}}
			p.unit = &source.Unit{Source: source.UnitKustomization}
			if tc.loose {
				p.unit = source.LooseUnitValue()
			}
			for _, s := range tc.secrets {
				p.secrets[ref{namespace: "ns", name: s}] = &secret{}
			}
			if got := p.renamedSecret(ref{namespace: "ns", name: "token"}, cmp.Or(tc.referrer, "prod-conn-eu")); got != tc.want {
				t.Errorf("renamedSecret = %q; want %q", got, tc.want)
			}
		})
	}
}

// TestSecretSourcesNeverPrintValues plants a canary in every value a
// Secret stand-in can hold in plaintext or ciphertext, with Connections
// that make every Secret check fire on them.
func TestSecretSourcesNeverPrintValues(t *testing.T) {
	const canary = "CANARY-91b2-do-not-print"
	input := `apiVersion: bitnami.com/v1alpha1
kind: SealedSecret
metadata: {name: sealed, namespace: ns}
spec:
  encryptedData: {token: ` + canary + `}
  template:
    data: {user: "` + canary + `\n` + canary + `"}
---
apiVersion: v1
kind: Secret
metadata: {name: sops, namespace: ns}
stringData:
  token: ENC[AES256_GCM,data:` + canary + `,type:str]
  plain: "` + canary + `\n` + canary + `"
  bad: 12
sops: {mac: "ENC[` + canary + `]"}
` +
		secretReader("a", "sealed", "{{ .user }}{{ .token }}{{ .nope }}") +
		secretReader("b", "sops", "{{ .plain }}{{ .token }}{{ .nope }}") +
		secretReader("c", "sopz", "{{ .plain }}")
	docs, ds := source.Parse("in.yaml", []byte(input))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	v := fixture.Validator(t)
	res := Compile(docs, v, Options{})
	codes := map[string]int{}
	for _, d := range res.Diagnostics {
		codes[d.Code]++
		if strings.Contains(d.String(), canary) || strings.Contains(d.Message, canary[:12]) {
			t.Errorf("diagnostic holds the canary: %s", d)
		}
	}
	// The SOPS Secret has a non-string stringData value, so it fails its
	// schema: that is reported on it, and Connection b's key checks do not
	// run on it. Connection c's Secret is missing (did you mean "sops"?).
	want := map[string]int{codeInjectionInvalid: 1, codeSecretKeyMissing: 1, codeValuesUnknown: 1, codeSchemaInvalid: 1, codeSecretMissing: 1}
	for code, n := range want {
		if codes[code] != n {
			t.Errorf("%s reported %d times; want %d\n%v", code, codes[code], n, diag.List(res.Diagnostics))
		}
	}
	if codes[codeKindUnknown] > 0 {
		t.Errorf("a Secret stand-in was reported as an unknown kind:\n%v", diag.List(res.Diagnostics))
	}
}

// secretReader is a document starting "---": Connection name in
// namespace ns, which reads Secret secret through the value template
// value.
func secretReader(name, secret, value string) string {
	return `---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: ` + name + `, namespace: ns}
spec:
  hosts: [a.example.com]
  credential: {kind: secret, secretRef: {name: ` + secret + `}}
  placement:
    inject:
      - {hosts: [a.example.com], header: Authorization, value: "` + value + `"}
`
}

// TestExternalSecretKeys holds the keys keyhole expects of an
// ExternalSecret's Secret to what the external-secrets controller writes:
// a template with data (or templateFrom) replaces the fetched keys unless
// its mergePolicy is Merge; creationPolicy Merge (or CreateOrMerge) keeps
// the keys the Secret already has, and several ExternalSecrets may merge
// into one Secret.
func TestExternalSecretKeys(t *testing.T) {
	es := func(target string) string {
		return "apiVersion: external-secrets.io/v1\nkind: ExternalSecret\nmetadata: {name: es, namespace: ns}\nspec:\n  secretStoreRef: {name: vault, kind: ClusterSecretStore}\n  target:\n    name: target\n" + target
	}
	tests := map[string]struct {
		input string
		reads string
		// want counts the codes reported; missing, when set, is a part of
		// the ConnectionSecretKeyMissing message.
		want    map[string]int
		missing string
		// in, when set, is a part of the first message of its code.
		in map[string]string
	}{
		"creationPolicy None creates no Secret": {
			input: es("    creationPolicy: None\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSecretMissing: 1},
			in:    map[string]string{codeSecretMissing: "ExternalSecret ns/es does not create it (spec.target.creationPolicy: None)"},
		},
		"creationPolicy None beside the Secret it reads: no duplicate, the Secret's keys": {
			input: "apiVersion: v1\nkind: Secret\nmetadata: {name: target, namespace: ns}\nstringData: {user: u}\n---\n" +
				es("    creationPolicy: None\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads:   "{{ .user }}{{ .raw }}",
			want:    map[string]int{codeSecretKeyMissing: 1},
			missing: `key "raw" is not in Secret ns/target (it has: user)`,
		},
		"creationPolicy Orphan creates the Secret": {
			input: es("    creationPolicy: Orphan\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
		"template data replaces spec.data": {
			input: es("    template:\n      data: {header: \"Bearer {{ .raw }}\"}\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSecretKeyMissing: 1},
			// The Secret holds only the template's keys.
			missing: `key "raw" is not in Secret ns/target (it has: header); ExternalSecret ns/es fetches it, but its spec.target.template has data`,
		},
		"template data replaces spec.data, the template's key read": {
			input: es("    template:\n      data: {header: \"Bearer {{ .raw }}\"}\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .header }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
		"mergePolicy Merge keeps spec.data": {
			input: es("    template:\n      mergePolicy: Merge\n      data: {header: \"Bearer {{ .raw }}\"}\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}{{ .header }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
		"a template without data keeps spec.data": {
			input: es("    template:\n      type: Opaque\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
		"template data over dataFrom: the keys are the template's": {
			input:   es("    template:\n      data: {token: \"{{ .GITHUB_TOKEN }}\"}\n  dataFrom:\n    - extract: {key: github}\n"),
			reads:   "{{ .tokn }}",
			want:    map[string]int{codeSecretKeyMissing: 1},
			missing: `key "tokn" is not in Secret ns/target; ExternalSecret ns/es writes "token", one edit from it: correct whichever of the two is misspelt (it has: token)`,
		},
		"template data over dataFrom, a store key read": {
			input:   es("    template:\n      data: {token: \"{{ .GITHUB_TOKEN }}\"}\n  dataFrom:\n    - extract: {key: github}\n"),
			reads:   "{{ .GITHUB_TOKEN }}",
			want:    map[string]int{codeSecretKeyMissing: 1},
			missing: `(it has: token); ExternalSecret ns/es may fetch it through spec.dataFrom, but its spec.target.template has data`,
		},
		"dataFrom merged into the template: keys unknown": {
			input: es("    template:\n      mergePolicy: Merge\n      data: {token: \"{{ .GITHUB_TOKEN }}\"}\n  dataFrom:\n    - extract: {key: github}\n"),
			reads: "{{ .GITHUB_TOKEN }}",
			want:  map[string]int{codeKeysUnknown: 1},
		},
		"templateFrom into the data: keys unknown": {
			input: es("    template:\n      templateFrom:\n        - {configMap: {name: tpl, items: [{key: k}]}}\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKeysUnknown: 1},
		},
		"templateFrom into labels only: the fetched keys are replaced by none": {
			input:   es("    template:\n      templateFrom:\n        - {target: labels, literal: \"team: a\"}\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads:   "{{ .raw }}",
			want:    map[string]int{codeSecretKeyMissing: 1},
			missing: `key "raw" is not in Secret ns/target (it has: no keys); ExternalSecret ns/es fetches it`,
		},
		"a manifest target makes no Secret": {
			input: es("    manifest: {apiVersion: v1, kind: ConfigMap}\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSecretMissing: 1},
		},
		"a manifest target of kind Secret is one": {
			input: es("    manifest: {apiVersion: v1, kind: Secret}\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
		"creationPolicy Merge keeps the Secret's other keys": {
			input: es("    creationPolicy: Merge\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .other }}",
			want:  map[string]int{codeKeysUnknown: 1},
		},
		"creationPolicy CreateOrMerge keeps the Secret's other keys": {
			input: es("    creationPolicy: CreateOrMerge\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .other }}",
			want:  map[string]int{codeKeysUnknown: 1},
		},
		"merged into a Secret the input holds: no duplicate, keys known": {
			input: "apiVersion: v1\nkind: Secret\nmetadata: {name: target, namespace: ns}\nstringData: {user: u}\n---\n" +
				es("    creationPolicy: Merge\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads:   "{{ .user }}{{ .raw }}{{ .nope }}",
			want:    map[string]int{codeSecretKeyMissing: 1, codeValuesUnknown: 1},
			missing: `key "nope" is not in Secret ns/target (it has: raw, user)`,
		},
		"merged before the Secret it merges into": {
			input: es("    creationPolicy: Merge\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n") +
				"---\napiVersion: v1\nkind: Secret\nmetadata: {name: target, namespace: ns}\nstringData: {user: u}\n",
			reads: "{{ .user }}{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
		"two ExternalSecrets merging into one Secret": {
			input: es("    creationPolicy: Merge\n  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n") +
				"---\n" + strings.Replace(es("    creationPolicy: Merge\n  data:\n    - {secretKey: other, remoteRef: {key: gh}}\n"), "name: es,", "name: es2,", 1),
			reads: "{{ .raw }}{{ .other }}{{ .third }}",
			want:  map[string]int{codeKeysUnknown: 1},
		},
		"two owners are still a duplicate": {
			input: es("  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n") +
				"---\n" + strings.Replace(es("  data:\n    - {secretKey: raw, remoteRef: {key: gh}}\n"), "name: es,", "name: es2,", 1),
			reads: "{{ .raw }}",
			want:  map[string]int{codeDuplicateObject: 1, codeValuesUnknown: 1},
		},
	}
	v := fixture.Validator(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			holds := maps.Clone(tc.in)
			if tc.missing != "" {
				if holds == nil {
					holds = map[string]string{}
				}
				holds[codeSecretKeyMissing] = tc.missing
			}
			checkCodes(t, v, tc.input+"\n"+secretReader("c", "target", tc.reads), tc.want, holds)
		})
	}
}

// checkCodes compiles text and requires its diagnostics to count want's
// codes, and the first of each code in holds to hold that text in its
// message or field path.
func checkCodes(t *testing.T, v *schema.Validator, text string, want map[string]int, holds map[string]string) {
	t.Helper()
	docs, ds := source.Parse("in.yaml", []byte(text))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	res := Compile(docs, v, Options{})
	codes := map[string]int{}
	for _, d := range res.Diagnostics {
		codes[d.Code]++
		if h, ok := holds[d.Code]; ok && codes[d.Code] == 1 && !strings.Contains(d.Message+" "+d.Path, h) {
			t.Errorf("%s: %q (at %s) does not hold %q", d.Code, d.Message, d.Path, h)
		}
	}
	if !maps.Equal(codes, want) {
		t.Errorf("codes %v; want %v\n%v", codes, want, diag.List(res.Diagnostics))
	}
}

// TestClusterExternalSecret: the Secret a ClusterExternalSecret makes is
// in each namespace it lists, and, when a selector picks namespaces, in
// whichever namespace a Connection reads it from; it is named as the
// ExternalSecret's would be, after spec.externalSecretName, else the
// ClusterExternalSecret's own name.
func TestClusterExternalSecret(t *testing.T) {
	ces := func(name, spec string) string {
		return "apiVersion: external-secrets.io/v1\nkind: ClusterExternalSecret\nmetadata: {name: " + name + "}\nspec:\n" + spec
	}
	const store = "  externalSecretSpec:\n    secretStoreRef: {name: vault, kind: ClusterSecretStore}\n"
	const targetRaw = store + "    target: {name: target}\n    data:\n      - {secretKey: raw, remoteRef: {key: gh}}\n"
	// namespace is a Namespace object with these labels (a flow mapping,
	// or "" for none).
	namespace := func(name, labels string) string {
		md := "{name: " + name + "}"
		if labels != "" {
			md = "{name: " + name + ", labels: " + labels + "}"
		}
		return "---\napiVersion: v1\nkind: Namespace\nmetadata: " + md + "\n"
	}
	tests := map[string]struct {
		input string
		reads string
		want  map[string]int
		// in, when set, is a part of the first message of its code.
		in map[string]string
	}{
		"a listed namespace": {
			input: ces("cs", "  namespaces: [other, ns]\n"+targetRaw),
			reads: "{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
			in:    map[string]string{codeValuesUnknown: "ClusterExternalSecret cs"},
		},
		"a listed namespace, a key it does not fetch": {
			input: ces("cs", "  namespaces: [ns]\n"+targetRaw),
			reads: "{{ .tokn }}",
			want:  map[string]int{codeSecretKeyMissing: 1},
			in:    map[string]string{codeSecretKeyMissing: `key "tokn" is not in Secret ns/target (it has: raw)`},
		},
		"the Connection's namespace not listed": {
			input: ces("cs", "  namespaces: [other]\n"+targetRaw),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSecretMissing: 1},
		},
		"a selector, no Namespace object: taken to pick the Connection's": {
			input: ces("cs", "  namespaceSelectors:\n    - matchLabels: {team: a}\n"+targetRaw),
			reads: "{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
			in:    map[string]string{codeValuesUnknown: "ClusterExternalSecret cs, taken to pick namespace ns, which no Namespace object in the input describes"},
		},
		"a selector, only another namespace's Namespace object: taken to pick": {
			input: ces("cs", "  namespaceSelectors:\n    - matchLabels: {team: a}\n"+targetRaw) + namespace("other", "{team: a}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
			in:    map[string]string{codeValuesUnknown: "taken to pick namespace ns"},
		},
		"matchLabels the Namespace has": {
			input: ces("cs", "  namespaceSelectors:\n    - matchLabels: {team: a}\n"+targetRaw) + namespace("ns", "{team: a, env: prod}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
			in:    map[string]string{codeValuesUnknown: "ClusterExternalSecret cs, whose selector picks namespace ns by the labels of its Namespace object"},
		},
		"matchLabels the Namespace does not have": {
			input: ces("cs", "  namespaceSelectors:\n    - matchLabels: {team: a}\n"+targetRaw) + namespace("ns", "{team: b}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeSecretMissing: 1},
			in:    map[string]string{codeSecretMissing: "ClusterExternalSecret cs makes it only in the namespaces its selector picks, and Namespace ns (labels: kubernetes.io/metadata.name=ns, team=b) is not one of them"},
		},
		"a Namespace without labels, matched by the name label the API server sets": {
			input: ces("cs", "  namespaceSelectors:\n    - matchLabels: {kubernetes.io/metadata.name: ns}\n"+targetRaw) + namespace("ns", ""),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
		},
		"the older single selector, not matched": {
			input: ces("cs", "  namespaceSelector:\n    matchLabels: {team: a}\n"+targetRaw) + namespace("ns", "{}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeSecretMissing: 1},
		},
		"selectors are OR'ed": {
			input: ces("cs", "  namespaceSelectors:\n    - matchLabels: {team: a}\n    - matchLabels: {env: prod}\n"+targetRaw) + namespace("ns", "{env: prod}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
		},
		"namespaceSelector OR'ed with namespaceSelectors": {
			input: ces("cs", "  namespaceSelector:\n    matchLabels: {env: prod}\n  namespaceSelectors:\n    - matchLabels: {team: a}\n"+targetRaw) + namespace("ns", "{env: prod}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
		},
		"matchLabels and matchExpressions of one selector are AND'ed": {
			input: ces("cs", "  namespaceSelectors:\n    - matchLabels: {team: a}\n      matchExpressions: [{key: env, operator: In, values: [prod]}]\n"+targetRaw) + namespace("ns", "{team: a, env: dev}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeSecretMissing: 1},
		},
		"In": {
			input: ces("cs", "  namespaceSelectors:\n    - matchExpressions: [{key: env, operator: In, values: [dev, prod]}]\n"+targetRaw) + namespace("ns", "{env: prod}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
		},
		"NotIn picks a Namespace without the label": {
			input: ces("cs", "  namespaceSelectors:\n    - matchExpressions: [{key: env, operator: NotIn, values: [prod]}]\n"+targetRaw) + namespace("ns", "{team: a}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
		},
		"NotIn, the value listed": {
			input: ces("cs", "  namespaceSelectors:\n    - matchExpressions: [{key: env, operator: NotIn, values: [prod]}]\n"+targetRaw) + namespace("ns", "{env: prod}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeSecretMissing: 1},
		},
		"Exists": {
			input: ces("cs", "  namespaceSelectors:\n    - matchExpressions: [{key: team, operator: Exists}]\n"+targetRaw) + namespace("ns", "{team: \"\"}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
		},
		"DoesNotExist": {
			input: ces("cs", "  namespaceSelectors:\n    - matchExpressions: [{key: team, operator: DoesNotExist}]\n"+targetRaw) + namespace("ns", "{team: a}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeSecretMissing: 1},
		},
		"an empty selector picks every namespace": {
			input: ces("cs", "  namespaceSelectors:\n    - {}\n"+targetRaw) + namespace("ns", "{team: a}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
		},
		"listed namespaces and selectors are OR'ed": {
			input: ces("cs", "  namespaces: [ns]\n  namespaceSelectors:\n    - matchLabels: {team: b}\n"+targetRaw) + namespace("ns", "{team: a}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
		},
		"a second ClusterExternalSecret of the same Secret picks it": {
			input: ces("cs", "  namespaceSelectors:\n    - matchLabels: {team: b}\n"+targetRaw) + "---\n" +
				ces("cs2", "  namespaceSelectors:\n    - matchLabels: {team: a}\n"+targetRaw) + namespace("ns", "{team: a}"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeKindUnknown: 1, codeValuesUnknown: 1},
			in:    map[string]string{codeValuesUnknown: "ClusterExternalSecret cs2, whose selector picks"},
		},
		"an operator the controller refuses: it makes nothing": {
			input: ces("cs", "  namespaces: [ns]\n  namespaceSelectors:\n    - matchExpressions: [{key: team, operator: in, values: [a]}]\n"+targetRaw),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSchemaInvalid: 1, codeSecretMissing: 1},
			in: map[string]string{
				codeSchemaInvalid: `spec.namespaceSelectors[0].matchExpressions[0].operator`,
				codeSecretMissing: "ClusterExternalSecret cs would make it, but the external-secrets controller refuses its selector",
			},
		},
		"In without values: the controller makes nothing": {
			input: ces("cs", "  namespaceSelector:\n    matchExpressions: [{key: team, operator: In}]\n"+targetRaw),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSchemaInvalid: 1, codeSecretMissing: 1},
			in:    map[string]string{codeSchemaInvalid: `spec.namespaceSelector.matchExpressions[0].values`},
		},
		"a label key the controller refuses: it makes nothing": {
			input: ces("cs", "  namespaceSelector:\n    matchLabels: {\"bad key\": a}\n"+targetRaw),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSchemaInvalid: 1, codeSecretMissing: 1},
			in:    map[string]string{codeSchemaInvalid: `spec.namespaceSelector.matchLabels["bad key"]`},
		},
		"creationPolicy None: no Secret in the namespaces it lists": {
			input: ces("cs", "  namespaces: [ns]\n"+store+"    target: {name: target, creationPolicy: None}\n    data:\n      - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSecretMissing: 1},
			in:    map[string]string{codeSecretMissing: "ClusterExternalSecret cs does not create it (spec.externalSecretSpec.target.creationPolicy: None)"},
		},
		"creationPolicy None: no Secret where its selector picks": {
			input: ces("cs", "  namespaceSelectors:\n    - {}\n"+store+"    target: {name: target, creationPolicy: None}\n    data:\n      - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSecretMissing: 1},
			in:    map[string]string{codeSecretMissing: "ClusterExternalSecret cs does not create it (spec.externalSecretSpec.target.creationPolicy: None)"},
		},
		"the older single selector, a key it does not fetch": {
			input: ces("cs", "  namespaceSelector:\n    matchLabels: {team: a}\n"+targetRaw),
			reads: "{{ .tokn }}",
			want:  map[string]int{codeSecretKeyMissing: 1},
		},
		"no namespaces and no selector": {
			input: ces("cs", targetRaw),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSecretMissing: 1},
		},
		"named after externalSecretName": {
			input: ces("cs", "  namespaces: [ns]\n  externalSecretName: target\n"+store+"    data:\n      - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
		"named after itself": {
			input: ces("target", "  namespaces: [ns]\n"+store+"    data:\n      - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
		"a key the API server refuses, at its path": {
			input: ces("cs", "  namespaces: [ns]\n"+store+"    target: {name: target}\n    data:\n      - {secretKey: \"bad key\", remoteRef: {key: gh}}\n"),
			reads: `{{ index . \"bad key\" }}`,
			want:  map[string]int{codeSchemaInvalid: 1, codeTemplateInvalid: 1},
			in:    map[string]string{codeSchemaInvalid: "spec.externalSecretSpec.data[0].secretKey"},
		},
		"a manifest target makes no Secret": {
			input: ces("cs", "  namespaces: [ns]\n"+store+"    target: {name: target, manifest: {apiVersion: v1, kind: ConfigMap}}\n    data:\n      - {secretKey: raw, remoteRef: {key: gh}}\n"),
			reads: "{{ .raw }}",
			want:  map[string]int{codeSecretMissing: 1},
		},
		"v1beta1": {
			input: strings.Replace(ces("cs", "  namespaces: [ns]\n"+targetRaw), "external-secrets.io/v1", "external-secrets.io/v1beta1", 1),
			reads: "{{ .raw }}",
			want:  map[string]int{codeValuesUnknown: 1},
		},
	}
	v := fixture.Validator(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			checkCodes(t, v, tc.input+"\n"+secretReader("c", "target", tc.reads), tc.want, tc.in)
		})
	}
}
