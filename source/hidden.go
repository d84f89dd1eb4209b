package source

import "path/filepath"

// CodeInputHidden is a file of keyhole's kinds that a walk does not read
// because it lies in a directory (or is a file) whose name begins with a
// dot: git holds it, and something may deploy it.
const CodeInputHidden = "InputHidden"

// A walk enters no directory whose name begins with a dot (.github,
// .devcontainer and .vscode hold other tools' YAML), but a tool's output
// committed under one (.generated/agents) is still in git, and kubectl
// apply -k, or an engine, applies it. Each such directory or file is
// looked at, in a bounded way, for keyhole's kinds; one that holds them
// is said once, unless a build reads the file anyway.

// hiddenBudget bounds the entries a look into one hidden directory
// visits, and hiddenReads the files' heads it reads: a note, not a walk.
const (
	hiddenBudget = 2000
	hiddenReads  = 200
)

// hiddenKeyhole returns the first input file (in lexical order) at or
// under p (absolute) that names keyhole's kinds, or "" when none does
// within the look's bounds.
func hiddenKeyhole(fsys fileSystem, p string) string {
	entries, reads := 0, 0
	var look func(p string, dir bool) string
	look = func(p string, dir bool) string {
		if entries++; entries > hiddenBudget {
			return ""
		}
		if !dir {
			if !inputExt(filepath.Base(p)) || reads >= hiddenReads {
				return ""
			}
			reads++
			if namesKeyhole(p, readHead(fsys, p, ignoredHead)) {
				return p
			}
			return ""
		}
		list, err := fsys.ReadDir(p)
		if err != nil {
			return ""
		}
		for _, e := range list {
			if e.Name() == ".git" || !e.IsDir() && !e.Type().IsRegular() {
				continue
			}
			if f := look(filepath.Join(p, e.Name()), e.IsDir()); f != "" {
				return f
			}
		}
		return ""
	}
	fi, err := fsys.Stat(p)
	if err != nil {
		return ""
	}
	return look(p, fi.IsDir())
}

// sayHidden adds the walks' hidden notes whose file no document came
// from: a build that reads the file (a kustomization listing the hidden
// directory, an engine unit whose path it is) checks it.
func (l *loader) sayHidden() {
	if len(l.hiddenNotes) == 0 {
		return
	}
	read := map[string]bool{}
	for i := range l.docs {
		read[l.docs[i].File] = true
	}
	said := map[string]bool{}
	for _, d := range l.hiddenNotes {
		if f := d.Pos.File; !read[f] && !said[f] {
			said[f] = true
			l.diags = append(l.diags, d)
		}
	}
}
