package compiler

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// sampleToken builds a token of shape sh from its own alphabet, random
// looking (upper, lower and digits where the body allows them), of the
// shape's least length, so that no real token is written in this
// repository.
func sampleToken(sh CredentialShape) string {
	var b strings.Builder
	b.WriteString(sh.Prefix)
	mix := "Q7xK2mP9vT4wL8nB3cR6"
	for i := 0; b.Len() < len(sh.Prefix)+sh.Min; i++ {
		c := mix[i%len(mix)]
		if strings.IndexByte(sh.Body, c) < 0 {
			c = sh.Body[(i*7)%len(sh.Body)]
		}
		b.WriteByte(c)
	}
	return b.String()
}

// TestCredentialShapes: every row of the table is recognised alone, after
// "Bearer ", inside a URL and between quotes, and named by its own row.
func TestCredentialShapes(t *testing.T) {
	for _, sh := range CredentialShapes() {
		t.Run(sh.Prefix, func(t *testing.T) {
			tok := sampleToken(sh)
			for _, s := range []string{tok, "Bearer " + tok, "https://x:" + tok + "@example.com/", `"` + tok + `"`, "token=" + tok} {
				got, ok := MatchCredential(s)
				if !ok {
					t.Fatalf("MatchCredential(%q) found nothing, want %s", s, sh.Name)
				}
				if got.Name != sh.Name {
					t.Errorf("MatchCredential(%q) = %s, want %s", s, got.Name, sh.Name)
				}
			}
			if sh.Max > 0 {
				if _, ok := MatchCredential(tok + "9"); ok {
					t.Errorf("a %s one character too long matched", sh.Name)
				}
			}
			if _, ok := MatchCredential(tok[:len(tok)-1]); ok && sh.Prefix != "sk-ant-" {
				t.Errorf("a %s one character short matched", sh.Name)
			}
			if _, ok := MatchCredential("x" + tok); ok {
				t.Errorf("a %s inside a word matched", sh.Name)
			}
		})
	}
}

// TestCredentialShapesNegative: ordinary strings of the inputs keyhole
// reads, and words that begin like a token, are not tokens.
func TestCredentialShapesNegative(t *testing.T) {
	for _, s := range []string{
		"Bearer {{ .token }}",
		"Bearer ${GITHUB_TOKEN}",
		"omnia-injected-github-acme",
		"ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
		"ghp_${GITHUB_TOKEN_WITH_A_LONG_VARIABLE_NAME}",
		"xoxb-placeholder-for-the-slack-bot",
		"sk-learn-is-a-machine-learning-library-2024",
		"sk-this-is-a-hyphenated-name-with-digits-123",
		"task-runner-and-desk-organizer-for-everyone",
		"AKIAIOSFODNN7EXAMPL", // one short
		"glpat-",
		"AIzaSy",
		"api.github.com",
		"ghcr.io/acme/agent-workspace:1.4.2",
		"/repos/acme/widgets/pulls",
		"source control the agent's code may read and open pull requests on",
		"hf_hub_download_is_a_function_name_here",
		"npm_config_registry_is_an_env_var_name",
		"github_pat_",
		"rk_live_",
	} {
		if sh, ok := MatchCredential(s); ok {
			t.Errorf("MatchCredential(%q) = %s, want none", s, sh.Name)
		}
	}
}

// TestCredentialShapeBounds keeps MatchCredential's shortcuts true to the
// table: no token is shorter than shortestCredential, and every prefix
// starts with a byte of credentialStarts.
func TestCredentialShapeBounds(t *testing.T) {
	for _, sh := range CredentialShapes() {
		if n := len(sh.Prefix) + sh.Min; n < shortestCredential {
			t.Errorf("%s tokens may be %d bytes, shorter than shortestCredential (%d)", sh.Name, n, shortestCredential)
		}
		if !strings.Contains(credentialStarts, sh.Prefix[:1]) {
			t.Errorf("%s's prefix %q starts with a byte credentialStarts (%q) lacks", sh.Name, sh.Prefix, credentialStarts)
		}
		if sh.Max > 0 && sh.Max < sh.Min {
			t.Errorf("%s: Max %d < Min %d", sh.Name, sh.Max, sh.Min)
		}
	}
}

// TestFindCredentials: keys and values at any depth are found, with
// paths that hold no part of the token.
func TestFindCredentials(t *testing.T) {
	tok := sampleToken(CredentialShapes()[0])
	src := "a: {b: [x, \"Bearer " + tok + "\"]}\n" + tok + ": {c: d}\nok: plain\n"
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	got := findCredentials(&n)
	want := []string{"a.b[1]", ""}
	if len(got) != len(want) {
		t.Fatalf("found %d, want %d: %+v", len(got), len(want), got)
	}
	for i, f := range got {
		if f.at.String() != want[i] {
			t.Errorf("finding %d at %q, want %q", i, f.at.String(), want[i])
		}
		if strings.Contains(f.at.String(), tok[4:]) || strings.Contains(f.shape, tok[4:]) {
			t.Errorf("finding %d holds the token: %+v", i, f)
		}
	}
	if !got[1].key || got[0].key {
		t.Errorf("key flags = %v, %v; want false, true", got[0].key, got[1].key)
	}
}

// TestRedactCredentials: every token of a message is replaced by its
// shape's name, and the rest is kept.
func TestRedactCredentials(t *testing.T) {
	gh, aws := sampleToken(CredentialShapes()[0]), sampleToken(CredentialShapes()[6])
	for in, want := range map[string]string{
		`"` + gh + `" is not a host`:     `"<GitHub personal access token (ghp_...), not shown>" is not a host`,
		"a " + gh + " b " + aws + " c":   "a <GitHub personal access token (ghp_...), not shown> b <AWS access key ID (AKIA...), not shown> c",
		"nothing to hide in this string": "nothing to hide in this string",
		"":                               "",
	} {
		if got := RedactCredentials(in); got != want {
			t.Errorf("RedactCredentials(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRedactCredentialsAllocatesNothingWithoutToken: every message and
// field path check prints is searched for tokens, at each byte a token
// may start at, and one that holds none comes back as it was, without
// allocating (the shape table is built once, not at each such byte).
func TestRedactCredentialsAllocatesNothingWithoutToken(t *testing.T) {
	msg := "inject entry 0 has no rules: every method on every path of api-08100.example.com, git-08100.example.com carries the credential (a git push, a DELETE)"
	if got := RedactCredentials(msg); got != msg {
		t.Fatalf("RedactCredentials changed a message without a token:\n%s", got)
	}
	if n := testing.AllocsPerRun(100, func() { RedactCredentials(msg) }); n != 0 {
		t.Errorf("RedactCredentials allocates %.0f times on a message without a token, want 0", n)
	}
}

// TestFindCredentialsAllocatesLittleWithoutToken: every Connection and
// agent is searched for tokens, field by field; a document that holds
// none costs a few allocations for the whole walk, not some for each
// field on the way.
func TestFindCredentialsAllocatesLittleWithoutToken(t *testing.T) {
	src := `apiVersion: keyhole.dev/v1alpha1
kind: Connection
metadata: {name: github-08100, namespace: team-01}
spec:
  hosts: [api-08100.example.com, git-08100.example.com]
  credential: {kind: token, secretRef: {name: github-08100}}
  placement:
    inject:
      - hosts: [api-08100.example.com]
        header: Authorization
        value: "Bearer {{ .token }}"
        rules:
          - methods: [GET, HEAD]
            pathPrefixes: [/repos/acme/, /user]
      - hosts: [git-08100.example.com]
        basic: {usernameKey: user, passwordKey: token}
`
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatal(err)
	}
	if got := findCredentials(&n); got != nil {
		t.Fatalf("found %+v in a document without a token", got)
	}
	if allocs := testing.AllocsPerRun(100, func() { findCredentials(&n) }); allocs > 6 {
		t.Errorf("findCredentials allocates %.0f times on a document of some 40 fields without a token, want at most 6", allocs)
	}
}
