package config

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestCheckSecretKey(t *testing.T) {
	tests := map[string]struct {
		key  string
		ok   bool
		want string // in the message
	}{
		"plain":            {key: "token", ok: true},
		"dotted":           {key: "tls.crt", ok: true},
		"dot first":        {key: ".dockerconfigjson", ok: true},
		"dot dash":         {key: ".-", ok: true},
		"inner dots":       {key: "a..b", ok: true},
		"trailing dot":     {key: "a.", ok: true},
		"dash":             {key: "-", ok: true},
		"underscore":       {key: "_", ok: true},
		"upper":            {key: "API_KEY", ok: true},
		"longest":          {key: strings.Repeat("k", 253), ok: true},
		"too long":         {key: strings.Repeat("k", 254), want: "at most 253"},
		"empty":            {key: "", want: "empty"},
		"dot":              {key: ".", want: `refuses "." and ".."`},
		"dot dot":          {key: "..", want: `refuses "." and ".."`},
		"kubelet data":     {key: "..data", want: "kubelet keeps its own files"},
		"kubelet tmp":      {key: "..data_tmp", want: "kubelet keeps its own files"},
		"kubelet snapshot": {key: "..2024_01_01_00_00_00.1", want: "kubelet keeps its own files"},
		"three dots":       {key: "...", want: "kubelet keeps its own files"},
		"slash":            {key: "a/b", want: "holds '/'"},
		"traversal":        {key: "../x", want: "kubelet keeps its own files"},
		"space":            {key: "a b", want: "holds ' '"},
		"colon":            {key: "a:b", want: "holds ':'"},
		"NUL":              {key: "a\x00", want: "the byte 0x00"},
		"non-ASCII":        {key: "tökén", want: "the byte 0xc3"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckSecretKey(tc.key)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckSecretKey(%q) = %v, want ok %v", tc.key, err, tc.ok)
			}
			if err != nil && (!errors.Is(err, ErrName) || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("CheckSecretKey(%q) = %v, want ErrName and %q", tc.key, err, tc.want)
			}
		})
	}
}

func TestCheckSecretName(t *testing.T) {
	tests := map[string]struct {
		name string
		ok   bool
	}{
		"plain":              {name: "acme-github-token", ok: true},
		"dotted":             {name: "acme.github.token", ok: true},
		"digits":             {name: "0", ok: true},
		"long label":         {name: strings.Repeat("a", 64), ok: true},
		"longest":            {name: strings.Repeat("a", 253), ok: true},
		"too long":           {name: strings.Repeat("a", 254)},
		"empty":              {name: ""},
		"upper":              {name: "Acme"},
		"underscore":         {name: "acme_token"},
		"leading dash":       {name: "-acme"},
		"trailing dash":      {name: "acme-"},
		"label ends in dash": {name: "acme-.token"},
		"empty label":        {name: "acme..token"},
		"leading dot":        {name: ".acme"},
		"trailing dot":       {name: "acme."},
		"dot":                {name: "."},
		"dot dot":            {name: ".."},
		"slash":              {name: "a/b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if err := CheckSecretName(tc.name); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrName) {
				t.Fatalf("CheckSecretName(%q) = %v, want ok %v", tc.name, err, tc.ok)
			}
		})
	}
}

// FuzzSecretKeyRule holds CheckSecretKey to the API server's rule as its
// source states it (IsConfigMapKey): the length, the character class and
// hasChDirPrefix, each checked on its own.
func FuzzSecretKeyRule(f *testing.F) {
	for _, s := range []string{"token", "tls.crt", "..data", ".", "..", ".a", "a..b", "", "a/b", "...x"} {
		f.Add(s)
	}
	class := regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
	f.Fuzz(func(t *testing.T, key string) {
		kube := len(key) <= 253 && class.MatchString(key) && key != "." && key != ".." && !strings.HasPrefix(key, "..")
		err := CheckSecretKey(key)
		if (err == nil) != kube {
			t.Fatalf("CheckSecretKey(%q) = %v; the API server accepts it: %v", key, err, kube)
		}
		if (err == nil) != (len(key) <= MaxSecretKeyLen && regexp.MustCompile(SecretKeyPattern).MatchString(key)) {
			t.Fatalf("SecretKeyPattern and CheckSecretKey disagree on %q", key)
		}
	})
}
