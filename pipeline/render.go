package pipeline

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/render"
	"keyhole.dev/keyhole/source"
)

// Rendered is one deploy unit's render.
type Rendered struct {
	Name string // the unit's name; "" for the files outside any kustomization
	Dir  string // where a render of several units writes the unit's files (source.Unit.Dir)
	// DirFixed says a render of this unit alone writes it in Dir too
	// (source.Unit.DirFixed).
	DirFixed bool
	Cluster  string // the cluster the unit deploys to (source.Unit.Cluster)
	Plan     compiler.Plan
	Files    []render.File
}

// Render renders the units of a checked input that has no errors with the
// target's renderer, adding the target's diagnostics and rules to c. only,
// when it names a unit, keeps that one. A unit with nothing to render is
// left out; when none has anything, render.ErrEmpty is the error.
func Render(c *Checked, opts render.Options, renderer render.Renderer, only string) ([]Rendered, error) {
	return renderUnits(c, opts, renderer, only, true, nil)
}

// RenderTo is Render giving each unit's files to w as they are rendered
// (render.Options.Put), for render -o: the units it returns hold their
// files' paths, not their Data. The caller commits w, or aborts it.
func RenderTo(c *Checked, opts render.Options, renderer render.Renderer, only string, w *render.DirWriter) ([]Rendered, error) {
	return renderUnits(c, opts, renderer, only, true, w)
}

// BlockingErrors reports whether ds holds an error that stops a render;
// with ceiling false, a sandbox above the ceiling
// (compiler.CodeAccessAboveCeiling) does not, as for diff, which weighs
// the access against the ceiling itself.
func BlockingErrors(ds diag.List, ceiling bool) bool {
	return slices.ContainsFunc(ds, func(d diag.Diagnostic) bool {
		return d.Severity == diag.Error && d.Suppressed == "" && (ceiling || d.Code != compiler.CodeAccessAboveCeiling)
	})
}

func renderUnits(c *Checked, opts render.Options, renderer render.Renderer, only string, ceiling bool, w *render.DirWriter) ([]Rendered, error) {
	if BlockingErrors(c.Result.Diagnostics, ceiling) {
		return nil, nil
	}
	c.Rules = slices.Concat(render.OmniaRules(), render.AgentSandboxRules())
	var names []string
	var out []Rendered
	found := false
	for _, u := range c.Result.Units {
		names = append(names, UnitName(u.Name))
		if only != "" && u.Name != only && !(u.Name == source.LooseUnit && only == LooseName) {
			continue
		}
		found = true
		uopts := opts
		uopts.DefaultNamespace = cmp.Or(u.Namespace, opts.DefaultNamespace)
		if w != nil {
			uopts.Put = w.Unit(u.Dir)
			if u.DirFixed {
				uopts.Put = w.UnitAt(u.Dir)
			}
		}
		files, ds, err := renderer(u.Plan, uopts)
		c.Result.Diagnostics = append(c.Result.Diagnostics, ds...)
		if errors.Is(err, render.ErrEmpty) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Rendered{Name: u.Name, Dir: u.Dir, DirFixed: u.DirFixed, Cluster: u.Cluster, Plan: u.Plan, Files: files})
	}
	c.Result.Diagnostics.Sort()
	if only != "" && !found {
		return nil, fmt.Errorf("%w: --unit %q: the input has no such deploy unit (it has: %s)", ErrUsage, only, strings.Join(names, ", "))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no deploy unit has a sandbox", render.ErrEmpty)
	}
	return out, nil
}

// Stream is every unit's objects as one YAML stream, which render --krm
// prints and --stdout writes (WriteStream). One stream is what one cluster
// applies: several units' objects go in it when all deploy to one cluster
// and no two render the same object; when two overlays of one base do, a
// stream of both would apply one over the other, and the caller chooses
// one unit.
func Stream(units []Rendered) ([]byte, error) {
	all, err := streamed(units)
	if err != nil {
		return nil, err
	}
	return render.Stream(all)
}

// WriteStream writes the stream of Stream to w as it goes, rather than
// building it first: nothing is written when it is refused.
func WriteStream(w io.Writer, units []Rendered) error {
	all, err := streamed(units)
	if err != nil {
		return err
	}
	return render.WriteStream(w, all)
}

// streamed is every unit's files, for one stream; an error when two units
// deploy to different clusters, or render the same object.
func streamed(units []Rendered) ([]render.File, error) {
	if a, b := apart(units); a != nil {
		return nil, fmt.Errorf("%w: one stream is applied to one cluster, and deploy units %s (%s) and %s (%s) deploy to different ones: choose one with --unit, as each Argo CD application renders one", ErrUsage,
			UnitName(a.Name), clusterName(a.Cluster), UnitName(b.Name), clusterName(b.Cluster))
	}
	if a, b, clash := clashing(units); clash != "" {
		return nil, fmt.Errorf("%w: one stream holds each object once, and deploy units %s and %s both render %s: choose one with --unit, as each Argo CD application renders one", ErrUsage, UnitName(a), UnitName(b), clash)
	}
	if len(units) == 1 {
		return units[0].Files, nil
	}
	n := 0
	for _, u := range units {
		n += len(u.Files)
	}
	all := make([]render.File, 0, n)
	for _, u := range units {
		all = append(all, u.Files...)
	}
	return all, nil
}

// apart returns two units that deploy to different clusters (nil when
// all deploy to one), whose objects one stream cannot hold: whatever
// applies it applies them to one cluster.
func apart(units []Rendered) (a, b *Rendered) {
	for i := 1; i < len(units); i++ {
		if units[i].Cluster != units[0].Cluster {
			return &units[0], &units[i]
		}
	}
	return nil, nil
}

// clusterName names a unit's cluster to the user.
func clusterName(c string) string {
	return cmp.Or(c, "the default cluster")
}

// clashing returns two units that render a file of the same path (so the
// same object: paths derive from namespaces and names), and that path;
// "" when none do. Kustomizations are not streamed, and do not count.
func clashing(units []Rendered) (a, b, path string) {
	if len(units) < 2 {
		// A unit renders each path once.
		return "", "", ""
	}
	seen := map[string]string{}
	for _, u := range units {
		for _, f := range u.Files {
			if strings.HasSuffix(f.Path, "kustomization.yaml") {
				continue
			}
			if prev, ok := seen[f.Path]; ok && prev != u.Name {
				return prev, u.Name, f.Path
			}
			seen[f.Path] = u.Name
		}
	}
	return "", "", ""
}

// LooseName is how the files outside any kustomization are named to the
// user, and how a caller names their unit to Render.
const LooseName = "(loose files)"

// UnitName is the name of unit u as the user sees it: LooseName for the
// files outside any kustomization.
func UnitName(u string) string {
	if u == source.LooseUnit {
		return LooseName
	}
	return u
}

// Layout places the units' files in one output directory: one unit's at
// its top, as they are, unless its directory is fixed; several units'
// each under the unit's directory (the loose files' at the top), so that
// each is a kustomization of its own for a Flux Kustomization or an Argo
// CD application to point at.
func Layout(units []Rendered) []render.File {
	if len(units) == 1 && !units[0].DirFixed {
		return units[0].Files
	}
	var files []render.File
	for _, u := range units {
		files = append(files, Placed(u)...)
	}
	slices.SortFunc(files, func(a, b render.File) int { return strings.Compare(a.Path, b.Path) })
	return files
}

// Placed is a unit's files where a render of several units writes them.
func Placed(u Rendered) []render.File {
	if u.Dir == "" {
		return u.Files
	}
	out := make([]render.File, len(u.Files))
	for i, f := range u.Files {
		out[i] = render.File{Path: path.Join(u.Dir, f.Path), Data: f.Data}
	}
	return out
}
