package flux

import (
	"testing"

	"keyhole.dev/keyhole/source"
)

// A GitRepository's spec.ref names one revision, read in
// source-controller's order: commit, name, semver, tag, branch.
func TestRevision(t *testing.T) {
	for name, tc := range map[string]struct {
		ref    string
		rev    string
		semver bool
	}{
		"branch":            {ref: "{branch: main}", rev: "main"},
		"tag over branch":   {ref: "{branch: main, tag: v1.2.0}", rev: "v1.2.0"},
		"semver over tag":   {ref: "{tag: v1.2.0, semver: '>=1.0.0'}", rev: ">=1.0.0", semver: true},
		"name over semver":  {ref: "{semver: '>=1.0.0', name: refs/tags/v2.0.0}", rev: "v2.0.0"},
		"full branch name":  {ref: "{name: refs/heads/release}", rev: "release"},
		"other name":        {ref: "{name: refs/pull/1/head}", rev: "refs/pull/1/head"},
		"commit over name":  {ref: "{name: refs/heads/main, commit: 0123456789abcdef}", rev: "0123456789abcdef"},
		"no ref":            {ref: "{}", rev: ""},
		"ref not a mapping": {ref: "[main]", rev: ""},
	} {
		t.Run(name, func(t *testing.T) {
			docs, err := source.Parse("repo.yaml", []byte("apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nspec: {ref: "+tc.ref+"}\n"))
			if err != nil || len(docs) != 1 {
				t.Fatalf("parse: %v", err)
			}
			rev, semver := revision(source.Lookup(source.Lookup(docs[0].Node, "spec"), "ref"))
			if rev != tc.rev || semver != tc.semver {
				t.Errorf("revision(%s) = %q, %v; want %q, %v", tc.ref, rev, semver, tc.rev, tc.semver)
			}
		})
	}
}
