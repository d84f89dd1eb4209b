package kustbuild

import (
	"encoding/base64"
	"strconv"
	"testing"
)

func TestRedact(t *testing.T) {
	const secret = "s3cr3t-value"
	b64 := base64.StdEncoding.EncodeToString([]byte(secret))
	tests := map[string]struct {
		read map[string][]byte
		msg  string
		want string
	}{
		"stringData value": {
			read: map[string][]byte{"s.yaml": []byte("kind: Secret\nstringData: {token: " + secret + "}\n")},
			msg:  "bad " + secret, want: "bad [redacted]",
		},
		"data value, and what it decodes to": {
			read: map[string][]byte{"s.yaml": []byte("kind: Secret\ndata: {token: " + b64 + "}\n")},
			msg:  b64 + " is " + secret, want: "[redacted] is [redacted]",
		},
		"literal, whole and after =": {
			read: map[string][]byte{"kustomization.yaml": []byte("secretGenerator:\n- name: g\n  literals: [k=" + secret + "]\n")},
			msg:  "invalid literal k=" + secret + " (" + secret + ")", want: "invalid literal [redacted] ([redacted])",
		},
		"env file line": {
			read: map[string][]byte{"e.env": []byte("TOKEN=" + secret + "\n")},
			msg:  "line TOKEN=" + secret, want: "line [redacted]",
		},
		"an env line printed as bytes": {
			read: map[string][]byte{"e.env": []byte("T=" + secret + "\xff\n")},
			msg:  "line [84 61 115 51 99 114 51 116 255] has invalid utf8 bytes : [redacted]",
			want: "line [redacted] has invalid utf8 bytes : [redacted]",
		},
		"any byte dump, even of no file read": {
			msg:  "[[1 2 3 4]] and [10 200 255 0 7]",
			want: "[[redacted]] and [redacted]",
		},
		"short lists, numbers past a byte and words are kept": {
			msg:  "index [1 2 3], [256 1 2 3], [1  2 3 4], [+1 2 3 4], [a b c d], [] [",
			want: "index [1 2 3], [256 1 2 3], [1  2 3 4], [+1 2 3 4], [a b c d], [] [",
		},
		"a literal escaped by %q, once and twice": {
			read: map[string][]byte{"kustomization.yaml": []byte("secretGenerator:\n- name: g\n  literals: ['to\"k\\en']\n")},
			msg:  `accumulateDirectory: "invalid literal source to\"k\\en" and ` + strconv.Quote(strconv.Quote(`to"k\en`)),
			want: `accumulateDirectory: "invalid literal source [redacted]" and "\"[redacted]\""`,
		},
		"a multi-line value, folded line by line into a YAML scalar": {
			read: map[string][]byte{"s.yaml": []byte("kind: Secret\nstringData:\n  pem: |\n    -----BEGIN KEY-----\n    " + secret + "-one\n    " + secret + "-two\n    -----END KEY-----\n")},
			msg:  "node contents: '-----BEGIN KEY-----\n\n  " + secret + "-one\n\n  " + secret + "-two\n\n  -----END KEY-----'",
			want: "node contents: '[redacted]\n\n  [redacted]\n\n  [redacted]\n\n  [redacted]'",
		},
		"a value with a quote, in YAML single quotes": {
			read: map[string][]byte{"s.yaml": []byte("kind: Secret\nstringData: {token: \"it's-" + secret + "\"}\n")},
			msg:  "node contents: 'it''s-" + secret + "'",
			want: "node contents: '[redacted]'",
		},
		"a generator's file source, whole in base64": {
			read: map[string][]byte{"creds.yaml": []byte("password: " + secret + "\n")},
			msg:  "node contents: " + base64.StdEncoding.EncodeToString([]byte("password: "+secret+"\n")),
			want: "node contents: [redacted]",
		},
		"a quoted literal, as kustomize stores it": {
			read: map[string][]byte{"kustomization.yaml": []byte("secretGenerator:\n- name: g\n  literals: ['k=\"" + secret + "\"']\n")},
			msg:  "node contents: " + b64, want: "node contents: [redacted]",
		},
		"names and paths are kept": {
			read: map[string][]byte{"s.yaml": []byte("kind: Secret\nmetadata: {name: token-name}\nstringData: {token: " + secret + "}\n")},
			msg:  "'s.yaml': token-name", want: "'s.yaml': token-name",
		},
		"short values are kept, as they match words": {
			read: map[string][]byte{"s.yaml": []byte("kind: Secret\nstringData: {a: is}\n")},
			msg:  "this is fine", want: "this is fine",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Redact(tc.msg, tc.read); got != tc.want {
				t.Errorf("Redact = %q; want %q", got, tc.want)
			}
		})
	}
}
