package compiler

import (
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// A credential written into a Connection or an agent.yaml, rather than
// into a Secret the Connection names, would be rendered in plain text
// into the proxy's ConfigMap and committed to git. keyhole recognises
// the token shapes of the services sandboxes call, by prefix and body,
// and reports a string field that holds one without ever printing it.

// CredentialShape is one row of the credential shape table: a token
// issued by a known service, recognised by its fixed prefix and the
// characters and length of the random part after it.
type CredentialShape struct {
	// Name says what the token is, for messages: never the value.
	Name string
	// Prefix starts every token of the shape; it is printed in messages
	// as the shape's name, never with what follows it.
	Prefix string
	// Body is the set of characters the random part is made of.
	Body string
	// Min and Max bound the random part's length (Max 0: no bound).
	Min, Max int
	// Mixed requires the random part to hold an upper-case letter, a
	// lower-case letter and a digit, for prefixes that ordinary
	// hyphenated words could start with (sk-).
	Mixed bool
}

const (
	alnum       = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	upperDigits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	urlSafe     = alnum + "-_"
)

// CredentialShapes returns the shape table, most specific prefix first
// (sk-ant- before sk-): the first row that matches names the token.
func CredentialShapes() []CredentialShape {
	return []CredentialShape{
		{Name: "GitHub personal access token", Prefix: "ghp_", Body: alnum, Min: 36, Max: 36},
		{Name: "GitHub OAuth token", Prefix: "gho_", Body: alnum, Min: 36, Max: 36},
		{Name: "GitHub user-to-server token", Prefix: "ghu_", Body: alnum, Min: 36, Max: 36},
		{Name: "GitHub server-to-server token", Prefix: "ghs_", Body: alnum, Min: 36, Max: 36},
		{Name: "GitHub refresh token", Prefix: "ghr_", Body: alnum, Min: 36, Max: 36},
		{Name: "GitHub fine-grained personal access token", Prefix: "github_pat_", Body: alnum + "_", Min: 22},
		{Name: "AWS access key ID", Prefix: "AKIA", Body: upperDigits, Min: 16, Max: 16},
		{Name: "AWS temporary access key ID", Prefix: "ASIA", Body: upperDigits, Min: 16, Max: 16},
		{Name: "Slack bot token", Prefix: "xoxb-", Body: alnum + "-", Min: 10},
		{Name: "Slack user token", Prefix: "xoxp-", Body: alnum + "-", Min: 10},
		{Name: "Slack app-level token", Prefix: "xoxa-", Body: alnum + "-", Min: 10},
		{Name: "Slack refresh token", Prefix: "xoxr-", Body: alnum + "-", Min: 10},
		{Name: "Slack legacy workspace token", Prefix: "xoxs-", Body: alnum + "-", Min: 10},
		{Name: "Anthropic API key", Prefix: "sk-ant-", Body: urlSafe, Min: 32, Mixed: true},
		{Name: "OpenAI API key", Prefix: "sk-", Body: urlSafe, Min: 32, Mixed: true},
		{Name: "GitLab personal access token", Prefix: "glpat-", Body: urlSafe, Min: 20},
		{Name: "Google API key", Prefix: "AIza", Body: urlSafe, Min: 35, Max: 35},
		{Name: "Stripe live secret key", Prefix: "sk_live_", Body: alnum, Min: 24},
		{Name: "Stripe live restricted key", Prefix: "rk_live_", Body: alnum, Min: 24},
		{Name: "Hugging Face access token", Prefix: "hf_", Body: alnum, Min: 34, Max: 34},
		{Name: "npm access token", Prefix: "npm_", Body: alnum, Min: 36, Max: 36},
	}
}

// credentialShapes is the table, built once: findCredential reads it at
// every byte that may start a token, of every message check prints.
var credentialShapes = sync.OnceValue(CredentialShapes)

// shortestCredential is the length of the shortest token of the table,
// and credentialStarts the bytes its prefixes start with: MatchCredential
// looks no further into a string that is shorter, or at a byte that is
// not one of them (TestCredentialShapeBounds).
const (
	shortestCredential = 15
	credentialStarts   = "gAxsrhn"
)

// MatchCredential returns the shape of the first token s holds, and
// false when it holds none. A token starts at the beginning of s or after
// a character no token is made of (a space in "Bearer ghp_...", a quote,
// a colon), and its random part ends at the end of s or at a character
// its shape's body does not hold; a random part holds a letter and a
// digit, so words such as xoxb-placeholder-value and
// ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx are not taken for tokens.
func MatchCredential(s string) (CredentialShape, bool) {
	sh, _, _, ok := findCredential(s)
	return sh, ok
}

// RedactCredentials returns s with every token it holds replaced by the
// name of its shape, for a message that quotes what the user wrote.
func RedactCredentials(s string) string {
	sh, start, end, ok := findCredential(s)
	if !ok {
		return s
	}
	var b strings.Builder
	for ok {
		b.WriteString(s[:start])
		b.WriteString("<" + sh.describe() + ", not shown>")
		s = s[end:]
		sh, start, end, ok = findCredential(s)
	}
	b.WriteString(s)
	return b.String()
}

// findCredential returns the first token of s: its shape, and where it
// starts and ends.
func findCredential(s string) (sh CredentialShape, start, end int, ok bool) {
	if len(s) < shortestCredential {
		return CredentialShape{}, 0, 0, false
	}
	for i := 0; i < len(s); i++ {
		if i > 0 && isTokenByte(s[i-1]) || strings.IndexByte(credentialStarts, s[i]) < 0 {
			continue
		}
		for _, sh := range credentialShapes() {
			if n, ok := sh.matchAt(s[i:]); ok {
				return sh, i, i + n, true
			}
		}
	}
	return CredentialShape{}, 0, 0, false
}

// describe names the shape for a message: its name and prefix.
func (sh CredentialShape) describe() string { return sh.Name + " (" + sh.Prefix + "...)" }

// matchAt reports whether s starts with a token of the shape, and its
// length.
func (sh CredentialShape) matchAt(s string) (int, bool) {
	if !strings.HasPrefix(s, sh.Prefix) {
		return 0, false
	}
	body := s[len(sh.Prefix):]
	n := 0
	for n < len(body) && strings.IndexByte(sh.Body, body[n]) >= 0 {
		n++
	}
	if n < sh.Min || sh.Max > 0 && n > sh.Max {
		return 0, false
	}
	// A shape with a fixed length ends there: a letter or digit after
	// it makes a longer word, not this token.
	if n < len(body) && isAlnum(body[n]) {
		return 0, false
	}
	var upper, lower, digit bool
	for _, c := range []byte(body[:n]) {
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= '0' && c <= '9':
			digit = true
		}
	}
	if sh.Mixed {
		return len(sh.Prefix) + n, upper && lower && digit
	}
	return len(sh.Prefix) + n, digit && (upper || lower)
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// isTokenByte reports whether c can be part of a token, so that a token
// cannot start right after it.
func isTokenByte(c byte) bool {
	return isAlnum(c) || c == '_' || c == '-'
}

// credentialFinding is a string field of an object that holds a token:
// where, and of which shape. It holds no part of the value.
type credentialFinding struct {
	at    path
	key   bool // a key of the mapping at holds it, not a value
	shape string
}

// findCredentials walks an object's tree and returns each scalar, key or
// value, that holds a token, in document order; nil when none does.
func findCredentials(root *yaml.Node) []credentialFinding {
	var out []credentialFinding
	// steps is the path of the node being walked, one stack for the
	// whole walk (a key's name, or -1 and an item's index): a finding
	// makes it a path, and a document without one, most of them, makes
	// none (this runs for every Connection and agent).
	type step struct {
		name  string
		index int
	}
	var steps []step
	at := func() path {
		var p path
		for _, s := range steps {
			if s.index < 0 {
				p = append(p, s.name)
			} else {
				p = append(p, s.index)
			}
		}
		return p
	}
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				name := k.Value
				if sh, ok := MatchCredential(k.Value); ok {
					// The path is printed: it names the mapping, not
					// the key, and what is under the key is found
					// under a stand-in for it.
					out = append(out, credentialFinding{at: at(), key: true, shape: sh.describe()})
					name = "(credential)"
				}
				steps = append(steps, step{name: name, index: -1})
				walk(n.Content[i+1])
				steps = steps[:len(steps)-1]
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				steps = append(steps, step{index: i})
				walk(c)
				steps = steps[:len(steps)-1]
			}
		case yaml.ScalarNode:
			if sh, ok := MatchCredential(n.Value); ok {
				out = append(out, credentialFinding{at: at(), shape: sh.describe()})
			}
		}
		// An alias repeats what its anchor holds, reported there.
	}
	walk(root)
	return out
}
