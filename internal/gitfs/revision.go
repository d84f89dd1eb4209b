package gitfs

import (
	"errors"
	"regexp"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Ref is what a revision a GitOps engine names (an Argo CD targetRevision,
// a Flux GitRepository's ref) resolves to in this repository: the ref or
// commit that holds it, and its commit.
type Ref struct {
	// Name is the reference found (refs/tags/v1, refs/remotes/origin/main,
	// refs/heads/main), or "" for a commit named by its hash.
	Name string
	// Commit is the commit's full hash.
	Commit string
}

// IsTag reports whether the revision named a tag.
func (r Ref) IsTag() bool { return strings.HasPrefix(r.Name, "refs/tags/") }

// IsBranch reports whether the revision named a branch, local or
// remote-tracking.
func (r Ref) IsBranch() bool {
	return strings.HasPrefix(r.Name, "refs/heads/") || strings.HasPrefix(r.Name, "refs/remotes/")
}

// hashLike is an abbreviated or full commit hash.
var hashLike = regexp.MustCompile(`^[0-9a-f]{7,40}$`)

// ErrUnresolved: the revision names no tag, branch or commit the
// repository holds.
var ErrUnresolved = errors.New("no such tag, branch or commit in the repository")

// Resolve finds the revision rev as a remote serves it to an engine: a tag
// (refs/tags/rev), a branch (as the remote has it when the repository
// tracks it: refs/remotes/origin/rev, then any other remote's, else the
// local refs/heads/rev), or a commit named by its full or abbreviated
// hash. A name git would read otherwise (HEAD, main~1, a range) is not a
// revision an engine names and resolves to nothing.
func (r *Repo) Resolve(rev string) (Ref, error) {
	if rev == "" || strings.ContainsAny(rev, "~^:@*?[ \\") || strings.HasPrefix(rev, "-") || strings.Contains(rev, "..") {
		return Ref{}, ErrUnresolved
	}
	names := []string{"refs/tags/" + rev, "refs/remotes/origin/" + rev}
	if rs, err := r.repo.Remotes(); err == nil {
		var others []string
		for _, rm := range rs {
			if n := rm.Config().Name; n != "origin" {
				others = append(others, "refs/remotes/"+n+"/"+rev)
			}
		}
		slices.Sort(others)
		names = append(names, others...)
	}
	names = append(names, "refs/heads/"+rev)
	for _, n := range names {
		ref, err := r.repo.Reference(plumbing.ReferenceName(n), true)
		if err != nil {
			continue
		}
		h := ref.Hash()
		// An annotated tag names a tag object: its commit is what is read.
		if t, err := r.repo.TagObject(h); err == nil {
			c, err := t.Commit()
			if err != nil {
				return Ref{}, err
			}
			h = c.Hash
		}
		if _, err := r.repo.CommitObject(h); err != nil {
			return Ref{}, err
		}
		return Ref{Name: n, Commit: h.String()}, nil
	}
	if hashLike.MatchString(rev) {
		if h, err := r.repo.ResolveRevision(plumbing.Revision(rev)); err == nil {
			if _, err := r.repo.CommitObject(*h); err == nil {
				return Ref{Commit: h.String()}, nil
			}
		}
	}
	return Ref{}, ErrUnresolved
}

// Head is the commit checked out, and the branch it is (its short name),
// or "" when HEAD is detached (a CI checkout of a pull request, a tag).
func (r *Repo) Head() (commit, branch string, err error) {
	ref, err := r.repo.Head()
	if err != nil {
		return "", "", err
	}
	if ref.Name().IsBranch() {
		branch = ref.Name().Short()
	}
	return ref.Hash().String(), branch, nil
}

// Contains reports whether the commit of is ancestor, or has it in its
// history. An error says the history cannot tell (a shallow clone).
func (r *Repo) Contains(of, ancestor string) (bool, error) {
	if of == ancestor {
		return true, nil
	}
	a, err := r.repo.CommitObject(plumbing.NewHash(ancestor))
	if err != nil {
		return false, err
	}
	c, err := r.repo.CommitObject(plumbing.NewHash(of))
	if err != nil {
		return false, err
	}
	found := false
	err = object.NewCommitPreorderIter(c, nil, nil).ForEach(func(x *object.Commit) error {
		if x.Hash == a.Hash {
			found = true
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return false, err
	}
	return found, nil
}

// errStop ends a walk of the history.
var errStop = errors.New("stop")

// RemoteURLs are the URLs of the repository's remotes (fetch and push),
// as its config writes them.
func (r *Repo) RemoteURLs() []string {
	rs, err := r.repo.Remotes()
	if err != nil {
		return nil
	}
	var out []string
	for _, rm := range rs {
		out = append(out, rm.Config().URLs...)
	}
	return out
}
