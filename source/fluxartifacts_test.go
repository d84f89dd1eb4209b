package source

import (
	"cmp"
	"slices"
	"strings"
	"testing"
)

// TestFluxArtifactGenerator: a Kustomization building from an
// ExternalArtifact that the repository's ArtifactGenerator cuts from a
// source, directory for directory, is read where the source is read;
// where the source is not read or the cut is not directory for
// directory, a FluxSourceUnmapped warning names the flux.sources entry
// that would make it readable.
func TestFluxArtifactGenerator(t *testing.T) {
	conn := "apiVersion: omnia.altairalabs.ai/v1alpha1\nkind: Connection\nmetadata: {name: gh, namespace: agents}\n" +
		"spec:\n  hosts: [api.example.com]\n  credential: {kind: secret, secretRef: {name: gh-token}}\n"
	ks := func(p string) string {
		return "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: agents, namespace: flux-system}\n" +
			"spec:\n  path: " + cmp.Or(p, "./apps/agents/app") + "\n  sourceRef: {kind: ExternalArtifact, name: agents}\n"
	}
	gen := func(kind, from, to string) string {
		return "apiVersion: source.extensions.fluxcd.io/v1beta1\nkind: ArtifactGenerator\nmetadata: {name: cut, namespace: flux-system}\n" +
			"spec:\n  sources:\n    - {alias: repo, kind: " + kind + ", name: flux-system}\n" +
			"  artifacts:\n    - name: agents\n      originRevision: '@repo'\n      copy:\n        - {from: '" + from + "', to: '" + to + "'}\n"
	}
	cases := map[string]struct {
		gen, config string
		path        string // the Kustomization's spec.path, ./apps/agents/app when ""
		wantUnit    string // the Connection's unit, when read by one
		wantDiag    string
	}{
		"a directory of the repository's own GitRepository": {
			gen:      gen("GitRepository", "@repo/apps/agents/**", "@artifact/apps/agents/"),
			wantUnit: "flux:flux-system/agents",
		},
		"a directory with a trailing slash": {
			gen:      gen("GitRepository", "@repo/apps/", "@artifact/apps/"),
			wantUnit: "flux:flux-system/agents",
		},
		"an OCIRepository keyhole.yaml maps": {
			gen:      gen("OCIRepository", "@repo/apps/agents/app/", "@artifact/apps/agents/app/"),
			config:   "apiVersion: keyhole.dev/v1alpha1\nkind: Config\nflux:\n  sources:\n    - {kind: OCIRepository, name: flux-system, path: .}\n",
			wantUnit: "flux:flux-system/agents",
		},
		"an OCIRepository keyhole.yaml does not map": {
			gen:      gen("OCIRepository", "@repo/apps/agents/app/", "@artifact/apps/agents/app/"),
			wantDiag: "which ArtifactGenerator flux-system/cut copies from OCIRepository flux-system/flux-system, path for path; that source's artifact is not this repository's git root, so keyhole does not read it: to have it read, map that source to the directory of this repository that is its root in keyhole.yaml's flux.sources (kind: OCIRepository, namespace: flux-system, name: flux-system, path: DIR)",
		},
		// The artifact is the directory apps, its contents moved up to
		// its root: Flux's own example cuts its monorepo so.
		"a directory's contents moved to the artifact's root": {
			gen:      gen("GitRepository", "@repo/apps/**", "@artifact/"),
			path:     "./agents/app",
			wantUnit: "flux:flux-system/agents",
		},
		"a directory's contents moved up one level": {
			gen:      gen("GitRepository", "@repo/apps/agents/**", "@artifact/agents/"),
			path:     "./agents/app",
			wantUnit: "flux:flux-system/agents",
		},
		"a moved directory the path is not under": {
			gen:      gen("GitRepository", "@repo/apps/agents/**", "@artifact/agents/"),
			path:     "./other",
			wantDiag: `whose ArtifactGenerator flux-system/cut copies apps/agents of GitRepository flux-system/flux-system into it, and its spec.path "./other" is not under them`,
		},
		"a directory itself, not its contents, moved": {
			gen:      gen("GitRepository", "@repo/apps/agents/", "@artifact/agents/"),
			path:     "./agents/app",
			wantDiag: `makes with a copy from "@repo/apps/agents/" to "@artifact/agents/", which keyhole does not place`,
		},
		"a directory placed elsewhere": {
			gen:      gen("GitRepository", "@repo/deploy/**", "@artifact/apps/agents/app/"),
			wantDiag: `which ArtifactGenerator flux-system/cut makes with a copy from "@repo/deploy/**" to "@artifact/apps/agents/app/", which keyhole does not place in this repository's directories; so keyhole does not read it: to have it read, map the artifact to the directory of this repository that is its root in keyhole.yaml's flux.sources (kind: ExternalArtifact, namespace: flux-system, name: agents, path: DIR)`,
		},
		"a path the copies do not hold": {
			gen:      gen("GitRepository", "@repo/apps/other/", "@artifact/apps/other/"),
			wantDiag: `whose ArtifactGenerator flux-system/cut copies apps/other of GitRepository flux-system/flux-system into it, and its spec.path "./apps/agents/app" is not under them`,
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir, _ := gitRepo(t)
			files := map[string]string{
				"clusters/c1/agents.yaml":    ks(c.path),
				"clusters/c1/generator.yaml": c.gen,
				"apps/agents/app/c.yaml":     conn,
			}
			if c.config != "" {
				files["keyhole.yaml"] = c.config
			}
			writeFiles(t, dir, files)
			docs, ds, err := testLoad([]string{"."}, Options{Dir: dir})
			if err != nil {
				t.Fatal(err)
			}
			got := connectionsAs(docs, func(d *Document, u *Unit) string { return u.Name })
			if c.wantUnit != "" && !slices.Equal(got, []string{c.wantUnit}) {
				t.Errorf("Connection read in %q, want [%s]\n%s", got, c.wantUnit, ds)
			}
			if c.wantDiag != "" {
				if !strings.Contains(ds.Error(), "clusters/c1/agents.yaml:6:14: warning FluxSourceUnmapped: Flux Kustomization flux-system/agents builds from ExternalArtifact flux-system/agents, ") || !strings.Contains(ds.Error(), c.wantDiag) {
					t.Errorf("no FluxSourceUnmapped says %q:\n%s", c.wantDiag, ds)
				}
				if slices.Contains(got, "flux:flux-system/agents") {
					t.Errorf("Connection read in the unit it cannot be read in: %q", got)
				}
			}
		})
	}
}
