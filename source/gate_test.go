package source

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"

	"keyhole.dev/keyhole/diag"
)

// TestGitignoreNeverHidesTracked: a file git tracks is in the repository,
// and a cluster gets it, whatever a .gitignore says; a pull request that
// adds a .gitignore matching it (or its directory) beside it hides it
// from neither check nor diff, on the disk or in the commit. An untracked
// file the .gitignore matches is still skipped.
func TestGitignoreNeverHidesTracked(t *testing.T) {
	conn := func(name string) string {
		return "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: " + name + "}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: t}}\n"
	}
	dir, r := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"deploy/admin.yaml":      conn("admin"),
		"deploy/sub/nested.yaml": conn("nested"),
	})
	commitAll(t, r, "the sandboxes")
	// The pull request's .gitignore, committed after the files it names,
	// and an untracked file it matches.
	writeFiles(t, dir, map[string]string{
		".gitignore":          "admin.yaml\nsub/\nlocal*.yaml\n",
		"deploy/local-x.yaml": conn("untracked"),
	})
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Add(".gitignore"); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("ignore them", &git.CommitOptions{Author: testSig, Committer: testSig}); err != nil {
		t.Fatal(err)
	}
	names := func(opts Options) []string {
		docs, _, err := testLoad([]string{"deploy"}, opts)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range docs {
			out = append(out, d.Object().Name)
		}
		slices.Sort(out)
		return out
	}
	want := []string{"admin", "nested"}
	if got := names(Options{Dir: dir}); !slices.Equal(got, want) {
		t.Errorf("from disk: read %v, want %v (tracked files read, the untracked one skipped)", got, want)
	}
	if got := names(Options{Dir: dir, Tree: headTree(t, dir)}); !slices.Equal(got, want) {
		t.Errorf("from the commit: read %v, want %v", got, want)
	}
	_, ds, _ := testLoad([]string{"deploy"}, Options{Dir: dir})
	var notes []string
	for _, f := range Ignored(ds) {
		notes = append(notes, filepath.ToSlash(f))
	}
	if !slices.ContainsFunc(notes, func(f string) bool { return strings.HasSuffix(f, "local-x.yaml") }) {
		t.Errorf("the untracked ignored file is not named as skipped: %v", notes)
	}
}

// TestUnitNamesApart: a kustomization root in a directory named like a
// Flux Kustomization's unit (flux:flux-system/apps) is a unit of another
// name than that Kustomization's, so diff and render never take one for
// the other; its output directory is the one its path gives.
func TestUnitNamesApart(t *testing.T) {
	conn := func(name string) string {
		return "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: " + name + "}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: t}}\n"
	}
	dir, r := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"clusters/apps.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
			"spec:\n  path: ./apps\n  sourceRef: {kind: GitRepository, name: flux-system}\n",
		"apps/kustomization.yaml":                  "resources: [conn.yaml]\n",
		"apps/conn.yaml":                           conn("engine"),
		"flux:flux-system/apps/kustomization.yaml": "resources: [conn.yaml]\n",
		"flux:flux-system/apps/conn.yaml":          conn("directory"),
		"chart:x/Chart.yaml":                       "apiVersion: v2\nname: x\nversion: 0.1.0\n",
		"chart:x/templates/conn.yaml":              conn("chart"),
	})
	commitAll(t, r, "units")
	for _, tree := range []bool{false, true} {
		opts := Options{Dir: dir}
		if tree {
			opts.Tree = headTree(t, dir)
		}
		docs, _, err := testLoad([]string{"."}, opts)
		if err != nil {
			t.Fatal(err)
		}
		units := map[string]*Unit{}
		for _, d := range docs {
			u := d.Unit()
			if prev, ok := units[u.Name]; ok && prev.ID != u.ID {
				t.Errorf("units %s and %s are both named %q", prev.ID, u.ID, u.Name)
			}
			units[u.Name] = u
		}
		for name, dir := range map[string]string{
			"flux:flux-system/apps":   "flux/flux-system/apps",
			"./flux:flux-system/apps": "flux:flux-system/apps",
			"./chart:x":               "chart:x",
		} {
			u, ok := units[name]
			if !ok {
				t.Errorf("tree %v: no unit named %q among %v", tree, name, slices.Sorted(maps.Keys(units)))
				continue
			}
			if u.Dir != dir {
				t.Errorf("tree %v: unit %q writes to %q, want %q", tree, name, u.Dir, dir)
			}
		}
	}
}

// TestEngineUnitsBounded: one file declaring more deploy units than
// MaxEngineUnitsPerInput is an InputInvalid error naming the bound, and
// no unit past it is made.
func TestEngineUnitsBounded(t *testing.T) {
	dir, r := gitRepo(t)
	var b strings.Builder
	for i := range MaxEngineUnitsPerInput + 200 {
		fmt.Fprintf(&b, "---\n{apiVersion: kustomize.toolkit.fluxcd.io/v1, kind: Kustomization, metadata: {name: k%d, namespace: flux-system}, spec: {path: ./apps, sourceRef: {kind: GitRepository, name: flux-system}}}\n", i)
	}
	writeFiles(t, dir, map[string]string{
		"clusters/many.yaml":      b.String(),
		"apps/kustomization.yaml": "resources: [conn.yaml]\n",
		"apps/conn.yaml": "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: c}\n" +
			"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: t}}\n",
	})
	commitAll(t, r, "many units")
	docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	units := map[string]bool{}
	for _, d := range docs {
		if d.Unit().Source == UnitFlux {
			units[d.Unit().ID] = true
		}
	}
	if len(units) == 0 || len(units) > MaxEngineUnitsPerInput {
		t.Errorf("%d Flux units made, want some and at most the bound %d", len(units), MaxEngineUnitsPerInput)
	}
	found := false
	for _, d := range ds {
		if d.Code == CodeInputInvalid && d.Severity == diag.Error && d.Pos.File == "clusters/many.yaml" &&
			strings.Contains(d.Message, fmt.Sprintf("more than %d deploy units", MaxEngineUnitsPerInput)) {
			found = true
		}
	}
	if !found {
		t.Errorf("no InputInvalid error naming the bound at clusters/many.yaml among %d diagnostics", len(ds))
	}
}
