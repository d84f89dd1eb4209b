package source

import (
	"regexp"
	"strings"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/gitfs"
)

// An Argo CD source's targetRevision names what Argo CD reads: HEAD or a
// branch follows the repository, which keyhole reads as checked out; a
// tag or a commit pins it. A pinned revision other than the commit
// checked out is read from the working tree all the same, and said once
// per unit that holds something of keyhole's (CodeArgoCDRevision).

// CodeArgoCDRevision is reported at an Argo CD source whose
// targetRevision is a tag or commit other than the one keyhole reads:
// what Argo CD deploys may differ from what is checked.
const CodeArgoCDRevision = "ArgoCDRevision"

// commitLike and tagLike are the shapes of a pinned revision: a
// (short) commit hash, a version tag.
var (
	commitLike = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	tagLike    = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+([-+].*)?$`)
)

// repoRevs is what keyhole knows of the repository at one root: the
// commit it reads, and the commit each revision asked for names.
type repoRevs struct {
	repo    *gitfs.Repo
	head    string
	commits map[string]string
}

// pinnedElsewhere reports whether the revision rev of a source read from
// the repository at root is a tag or a commit that is not the commit
// keyhole reads (the one checked out, or the one --base/--head names).
func (l *loader) pinnedElsewhere(rev, root string) bool {
	if rev == "" || rev == "HEAD" || strings.HasPrefix(rev, "-") {
		return false
	}
	rr := l.argoRevs[root]
	if rr == nil {
		rr = &repoRevs{commits: map[string]string{}}
		if l.argoRevs == nil {
			l.argoRevs = map[string]*repoRevs{}
		}
		l.argoRevs[root] = rr
		if r, err := gitfs.OpenRepo(root); err == nil {
			rr.repo = r
			if t := l.opts.Tree; t != nil {
				rr.head = t.Commit()
			} else if t, err := r.Tree("HEAD"); err == nil {
				rr.head = t.Commit()
			}
		}
	}
	c, ok := rr.commits[rev]
	if !ok && rr.repo != nil {
		if t, err := rr.repo.Tree("refs/tags/" + rev); err == nil {
			c = t.Commit()
		} else if commitLike.MatchString(rev) {
			if t, err := rr.repo.Tree(rev); err == nil {
				c = t.Commit()
			}
		}
		rr.commits[rev] = c
	}
	switch {
	case c != "":
		return c != rr.head
	case commitLike.MatchString(rev):
		return !strings.HasPrefix(rr.head, rev)
	}
	return tagLike.MatchString(rev)
}

// closeRevs closes the repositories pinnedElsewhere opened.
func (l *loader) closeRevs() {
	for _, rr := range l.argoRevs {
		if rr.repo != nil {
			_ = rr.repo.Close()
		}
	}
	l.argoRevs = nil
}

// revisionNote is the warning that the Argo CD unit u, pinned to another
// revision, is read from the working tree.
func revisionNote(u *Unit) diag.Diagnostic {
	return diag.Diagnostic{Code: CodeArgoCDRevision, Severity: diag.Warning, Pos: u.Decl, Units: []string{u.Name},
		Message: "Argo CD Application " + strings.TrimPrefix(u.Name, "argocd:") + " builds its path at targetRevision " + u.pinned +
			", a tag or commit other than the one keyhole reads: keyhole checks the path as checked out, which may not be what Argo CD deploys; check that revision out to check what it deploys"}
}
