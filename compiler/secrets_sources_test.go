package compiler

import (
	"strings"
	"testing"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

func TestRenamedSecret(t *testing.T) {
	tests := map[string]struct {
		secrets []string
		want    string
	}{
		"namePrefix":              {secrets: []string{"prod-token"}, want: "prod-token"},
		"nameSuffix":              {secrets: []string{"token-dev"}, want: "token-dev"},
		"both":                    {secrets: []string{"prod-token-eu"}, want: "prod-token-eu"},
		"generator hash suffix":   {secrets: []string{"token-7h2kt9m5fb"}, want: "token-7h2kt9m5fb"},
		"not at a word boundary":  {secrets: []string{"prodtoken", "tokens"}},
		"several candidates":      {secrets: []string{"prod-token", "dev-token"}},
		"other namespace ignored": {secrets: nil},
		"the same name is no rename": {
			secrets: []string{"token"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := &pass{secrets: map[ref]*secret{{namespace: "other", name: "prod-token"}: {}}}
			for _, s := range tc.secrets {
				p.secrets[ref{namespace: "ns", name: s}] = &secret{}
			}
			if got := p.renamedSecret(ref{namespace: "ns", name: "token"}); got != tc.want {
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
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: a, namespace: ns}
spec:
  hosts: [a.example.com]
  credential: {kind: secret, secretRef: {name: sealed}}
  placement:
    inject:
      - {hosts: [a.example.com], header: Authorization, value: "{{ .user }}{{ .token }}{{ .nope }}"}
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: b, namespace: ns}
spec:
  hosts: [a.example.com]
  credential: {kind: secret, secretRef: {name: sops}}
  placement:
    inject:
      - {hosts: [a.example.com], header: Authorization, value: "{{ .plain }}{{ .token }}{{ .nope }}"}
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: c, namespace: ns}
spec:
  hosts: [a.example.com]
  credential: {kind: secret, secretRef: {name: sopz}}
  placement:
    inject:
      - {hosts: [a.example.com], header: Authorization, value: "{{ .plain }}"}
`
	docs, ds := source.Parse("in.yaml", []byte(input))
	if len(ds) > 0 {
		t.Fatal(ds)
	}
	v, err := schema.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
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
