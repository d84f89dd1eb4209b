package compiler

import (
	"hash/maphash"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/schema"
	"keyhole.dev/keyhole/source"
)

func parseNode(t *testing.T, s string) *yaml.Node {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(s), &n); err != nil {
		t.Fatal(err)
	}
	return n.Content[0]
}

func TestMerge(t *testing.T) {
	at := diag.Pos{File: "apps/base/c.yaml", Line: 3, Column: 5}
	d := func(msg string, units ...string) diag.Diagnostic {
		return diag.Diagnostic{Code: "X", Severity: diag.Error, Pos: at, Path: "spec", Message: msg, Units: units}
	}
	tests := map[string]struct {
		in    diag.List
		multi bool
		want  []string // message | units
	}{
		"one finding of a shared base, named once with its units": {
			in:    diag.List{d("m", "apps/prod"), d("m", "apps/staging")},
			multi: true,
			want:  []string{"m (in 2 deploy units: apps/prod, apps/staging)|apps/prod,apps/staging"},
		},
		"messages that differ by unit: the first unit's, said so": {
			in:    diag.List{d("in ns staging", "apps/staging"), d("in ns prod", "apps/prod")},
			multi: true,
			want:  []string{"in ns staging (in 2 deploy units: apps/prod, apps/staging; as apps/staging builds it)|apps/prod,apps/staging"},
		},
		"two findings of one unit at one place stay two": {
			in:    diag.List{d("host a", "apps/prod"), d("host b", "apps/prod"), d("host a", "apps/staging"), d("host b", "apps/staging")},
			multi: true,
			want: []string{
				"host a (in 2 deploy units: apps/prod, apps/staging)|apps/prod,apps/staging",
				"host b (in 2 deploy units: apps/prod, apps/staging)|apps/prod,apps/staging",
			},
		},
		"a file in the unit's own directory needs no note": {
			in:    diag.List{d("m", "apps"), d("m", "apps/base/..")},
			multi: true,
			want:  []string{"m|apps,apps/base/.."},
		},
		"one unit: no note": {
			in:   diag.List{d("m", "apps/prod")},
			want: []string{"m|apps/prod"},
		},
		"the loose files' unit is named by no note": {
			in:    diag.List{d("m")},
			multi: true,
			want:  []string{"m|"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			for _, d := range merge(tc.in, tc.multi) {
				got = append(got, d.Message+"|"+strings.Join(d.Units, ","))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestDifferences(t *testing.T) {
	docs := map[string]string{
		"a": "kind: Connection\nspec:\n  hosts: [a]\n  credential: {secretRef: {name: s}}\n",
		"b": "kind: Connection\nspec:\n  hosts: [a, b]\n  credential: {secretRef: {name: s}}\n",
		"c": "kind: Connection\nspec:\n  hosts: [a]\n  credential: {secretRef: {name: t}}\nextra: 1\n",
	}
	node := func(k string) *yaml.Node { return parseNode(t, docs[k]) }
	tests := map[string]struct {
		a, b string
		want []string
	}{
		"identical":             {a: "a", b: "a"},
		"a list that differs":   {a: "a", b: "b", want: []string{"spec.hosts"}},
		"deep and added fields": {a: "a", b: "c", want: []string{"spec.credential.secretRef", "extra"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := differences(node(tc.a), node(tc.b)); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestDuplicateWhenHashesCollide: DuplicateObject keys its index by a
// hash of each object's kind, namespace and name; with every hash the
// same, what it reports is what it reports with its own, and objects
// whose keys differ are still told apart.
func TestDuplicateWhenHashesCollide(t *testing.T) {
	dirs := []string{"duplicate-object", "deploy-units", "bindings", "agents"}
	want := map[string][]byte{}
	for _, d := range dirs {
		want[d] = render(compileDir(t, filepath.Join("testdata", "checks", d), Options{}).Diagnostics)
	}
	colliding := Options{keyHash: func(objectKey) uint64 { return 7 }}
	for _, d := range dirs {
		got := render(compileDir(t, filepath.Join("testdata", "checks", d), colliding).Diagnostics)
		if string(got) != string(want[d]) {
			t.Errorf("%s: with every hash colliding:\n%s\nwant:\n%s", d, got, want[d])
		}
	}
	if !strings.Contains(string(want["duplicate-object"]), "DuplicateObject") {
		t.Errorf("duplicate-object reports no DuplicateObject:\n%s", want["duplicate-object"])
	}
}

// TestObjectKeyString: the index tells keys apart as the keys written
// out are told apart, and hashes what it writes.
func TestObjectKeyString(t *testing.T) {
	seed := maphash.MakeSeed()
	for _, c := range []struct {
		k    objectKey
		want string
	}{
		{objectKey{"Connection", "team-a", "github"}, "Connection/team-a/github"},
		{objectKey{kind: schema.KindAgent, name: "support"}, "Agent/support"},
		{objectKey{"SandboxClass", "", "default"}, "SandboxClass/default"},
	} {
		if got := c.k.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.k, got, c.want)
		}
		if got, want := c.k.sum(seed), maphash.String(seed, c.want); got != want {
			t.Errorf("%+v: sum %x, want the hash of %q, %x", c.k, got, c.want, want)
		}
	}
}

// TestUniqueUnits: two deploy units under one name are an error at the
// second's declaration, and only the first is compiled; one unit met
// twice is not.
func TestUniqueUnits(t *testing.T) {
	a := &source.Unit{ID: "flux:flux-system/apps", Name: "flux:flux-system/apps", Source: source.UnitFlux}
	b := &source.Unit{ID: "kustomization:x", Name: "flux:flux-system/apps", Source: source.UnitKustomization, Decl: diag.Pos{File: "x/kustomization.yaml", Line: 1, Column: 1}}
	again := &source.Unit{ID: a.ID, Name: a.Name, Source: a.Source}
	got, ds := uniqueUnits([]*source.Unit{a, again, b})
	if len(got) != 2 || got[0] != a || got[1] != again {
		t.Errorf("kept %v, want the first unit and its twin", got)
	}
	if len(ds) != 1 || ds[0].Code != source.CodeInputInvalid || ds[0].Severity != diag.Error || ds[0].Pos != b.Decl {
		t.Errorf("diagnostics %v, want one InputInvalid error at %s", ds, b.Decl)
	}
}
