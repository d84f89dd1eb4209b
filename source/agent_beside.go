package source

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"

	"keyhole.dev/keyhole/diag"
)

// templateObject matches a top-level apiVersion or kind field of a
// template's text.
var templateObject = regexp.MustCompile(`(?m)^(apiVersion|kind)[ \t]*:`)

// templatesObject reports whether data, a chart template's text, writes
// a Kubernetes object: it gives both apiVersion and kind at its top level.
func templatesObject(data []byte) bool {
	kinds := map[string]bool{}
	for _, m := range templateObject.FindAllSubmatch(data, -1) {
		kinds[string(m[1])] = true
	}
	return len(kinds) == 2
}

// An agent.yaml is not a Kubernetes object, so kustomize never builds
// one; but one that sits beside a kustomization belongs to the deploy
// unit that kustomization builds, as the objects beside it do. A walk
// does not read a kustomization's directory (the build does), so the
// build reads it: the agent files beside the kustomization built and
// beside every base kustomization the build read.

// agentsBeside reads, into the build's deploy unit u, the agent files
// (agent.yaml, agent.yml) in the directory of the kustomization built
// (dir, absolute, named as named) and in the directory of each
// kustomization file the build read (read's keys); walked says a walk
// found the kustomization. below says the build is of a directory
// keyhole's own render reads whole (an Argo CD source of keyhole's
// plugin): every agent file under dir is the unit's, as keyhole render
// reads them.
func (l *loader) agentsBeside(u *Unit, named, dir string, walked bool, read map[string][]byte, below bool) {
	dirs := []string{filepath.Clean(dir)}
	for p := range read {
		if isKustomizationName(filepath.Base(p)) {
			dirs = append(dirs, filepath.Clean(filepath.Dir(p)))
		}
	}
	if below {
		for _, f := range walkAll(l.fsys, dir, &l.paths) {
			if isAgentName(f) {
				dirs = append(dirs, filepath.Dir(f))
			}
		}
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	for _, d := range dirs {
		for _, n := range []string{"agent.yaml", "agent.yml"} {
			abs := filepath.Join(d, n)
			if _, built := read[abs]; built {
				continue // objects the build read, not an agent
			}
			if fi, err := l.fsys.Lstat(abs); err != nil || fi.IsDir() {
				continue
			}
			l.readAgentBeside(u, l.under(named, dir, abs), abs, walked)
		}
	}
}

// readAgentBeside reads one agent file, reported as name, into the
// build's unit u.
func (l *loader) readAgentBeside(u *Unit, name, abs string, walked bool) {
	l.seen[abs] = true // not read again on its own
	if root, git := confinement(l.fsys, filepath.Dir(abs)); linkOutside(l.fsys, root, abs) != "" {
		l.diags = append(l.diags, linkOutsideDiag(name, git))
		return
	}
	r := l.parseRead(name, abs, l.read(abs, name, walked), walked)
	if r.err != nil {
		l.unreadable(name, r.err)
		return
	}
	var from *sharedFrom
	for i := range r.docs {
		if !r.docs[i].IsAgent() {
			// An object the kustomization does not list: kustomize
			// does not build it, so the unit does not deploy it.
			continue
		}
		if from == nil && r.docs[i].from != nil {
			// A copy: a Memo may share the file's with another Load.
			f := *r.docs[i].from
			f.unit = u
			from = &f
		}
		if from != nil {
			r.docs[i].from = from
		}
		l.docs = append(l.docs, &r.docs[i])
	}
	l.diags = append(l.diags, r.diags...)
}

// agentsInChart warns of an agent.yaml (agent.yml) at the top of the Helm
// chart in dir or in its templates: the walk does not read a chart's
// files one by one, and no render holds the file (helm renders templates
// only, and an agent.yaml in templates/ is no Kubernetes object), so the
// agent would be neither checked nor deployed, and said nowhere. One in
// templates/ that writes an object (apiVersion and kind at its top
// level, a Connection saved under that name) is a template like any
// other: helm renders it, and keyhole checks what it renders.
func (l *loader) agentsInChart(p, abs, dir string) {
	for _, sub := range []string{"", "templates"} {
		for _, n := range []string{"agent.yaml", "agent.yml"} {
			f := filepath.Join(dir, sub, n)
			if fi, err := l.fsys.Stat(f); err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if sub == "templates" && templatesObject(l.sniff(f, nil)) {
				continue // a template of an object, which helm renders
			}
			l.diags = append(l.diags, diag.Diagnostic{Code: CodeInputNotDeployed, Severity: diag.Warning,
				Pos: diag.Pos{File: l.under(p, abs, f), Line: 1, Column: 1},
				Message: fmt.Sprintf("%s lies in the Helm chart %s, whose render never holds it (helm renders the chart's templates, and an agent.yaml is no Kubernetes object), so the agent is not checked; put it beside the kustomization.yaml of the unit that deploys the chart, or in a directory no chart holds",
					n, l.under(p, abs, dir))})
		}
	}
}
