package source

import (
	"regexp"
	"strconv"
	"strings"
	"sync"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/gitfs"
)

// An Argo CD source's targetRevision names what Argo CD reads. HEAD, no
// revision, and the branch checked out are the working tree (or the
// commit --base/--head names), as is a branch whose tip the commit
// checked out holds in its history: the branch moved on by the change
// being checked (a pull request's merge commit, a branch made from it).
// A tag, a commit, or another branch pins the unit: keyhole reads its
// path at that commit from git, in process, when the repository holds it
// (gitfs.Repo.Resolve), and says so once (an ArgoCDRevision info). One it
// cannot resolve (a shallow clone, a tag not fetched, a semver range) is
// said once, as an ArgoCDRevision warning naming what would make it
// readable, and nothing is read for that unit: the working tree is not
// what it deploys. See docs/inputs.md, "Deploy units".

// CodeArgoCDRevision is reported at an Argo CD unit pinned to a revision
// other than the one keyhole reads: an info when it reads the unit at
// that revision from git, a warning when the repository does not hold it.
const CodeArgoCDRevision = "ArgoCDRevision"

// commitLike and tagLike are the shapes of a pinned revision: a
// (short) commit hash, a version tag.
var (
	commitLike = regexp.MustCompile(`^[0-9a-f]{7,40}$`)
	tagLike    = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+([-+].*)?$`)
)

// repoRevs is what keyhole knows of the repository at one root: the
// commit it reads, the branch checked out, and each revision asked for.
type repoRevs struct {
	repo   *gitfs.Repo
	head   string
	branch string
	pins   map[string]*revPin
	// remotes are the repository's remotes' URLs (repoKey).
	remotes map[string]bool
	// unreadable says why the repository's commits cannot be read,
	// when it is one but they cannot.
	unreadable string
}

// revPin is a revision an engine pins a unit to, other than the one
// keyhole reads: the commit's files when the repository holds it, or why
// it cannot be read and what would make it readable.
type revPin struct {
	// rev is the revision as written.
	rev string
	// ref is what it resolved to; fsys reads its commit (nil when it
	// did not resolve).
	ref  gitfs.Ref
	fsys fileSystem
	// unread, when fsys is nil, says why and what would make it readable.
	unread string
	// source names the Flux GitRepository whose ref it is, for a message.
	source string
	// other is set when the revision is not in this repository and the
	// source's URL is none of its remotes (or it has none): another
	// repository's.
	other bool
}

// pinAt is what the unit of a source read from the repository at root,
// at revision rev of the repository url names, reads: nil for the working
// tree (or the commit --base/--head names), else its pin. A branch is
// read from git only when url is one of the repository's remotes: a
// directory of this repository that an Application of another URL
// builds (a fork, a mirror, an example) is read as checked out, as a
// branch name alone does not say it is this repository's.
func (l *loader) pinAt(rev, root, url string) *revPin {
	rev = strings.TrimSpace(rev)
	if rev == "" || rev == "HEAD" {
		return nil
	}
	rr := l.revsAt(root)
	own := url != "" && rr.remotes[repoKey(url, "")]
	// A URL none of the remotes name is another repository's; with no
	// remote at all (a repository git init made) there is none to fetch
	// a revision from either, so the answer is the same in a clone and
	// outside one.
	other := url != "" && !own
	key := rev + "\x00" + strconv.FormatBool(own) + strconv.FormatBool(other)
	if p, ok := rr.pins[key]; ok {
		return p
	}
	p := rr.resolve(rev, own, other)
	rr.pins[key] = p
	return p
}

// revsAt is the repository at root as pinAt reads it: opened once, its
// commit checked out and its remotes.
func (l *loader) revsAt(root string) *repoRevs {
	rr := l.argoRevs[root]
	if rr == nil {
		rr = &repoRevs{pins: map[string]*revPin{}}
		if l.argoRevs == nil {
			l.argoRevs = map[string]*repoRevs{}
		}
		l.argoRevs[root] = rr
		if r, err := gitfs.OpenRepo(root); err == nil {
			head, branch, err := r.Head()
			if t := l.opts.Tree; t != nil {
				head, branch = t.Commit(), ""
			} else if err != nil {
				head = ""
			}
			if _, err := r.Tree(head); head != "" && err != nil {
				// Its objects cannot be read here (an alternates
				// file go-git does not follow): as a directory git
				// does not hold.
				rr.unreadable = err.Error()
				_ = r.Close()
			} else {
				rr.repo, rr.head, rr.branch = r, head, branch
				rr.remotes = map[string]bool{}
				for _, u := range r.RemoteURLs() {
					rr.remotes[repoKey(u, "")] = true
				}
			}
		}
	}
	return rr
}

// semverRange is a revision Argo CD reads as a semver constraint over
// the repository's tags (1.2.*, >=1.0.0 <2.0.0, ~1.2, ^1.2).
var semverRange = regexp.MustCompile(`(^|\.)[*xX]$|[<>=~^ ]|\|\|`)

// resolve is pinAt's answer for rev, not yet known; own says the source's
// URL is one of the repository's remotes, other that it is a URL none of
// them is.
func (rr *repoRevs) resolve(rev string, own, other bool) *revPin {
	p := &revPin{rev: rev}
	branchLike := !commitLike.MatchString(rev) && !tagLike.MatchString(rev) && !semverRange.MatchString(rev)
	switch {
	case rr.repo == nil:
		if branchLike {
			return nil // a branch of a directory git does not hold: as written
		}
		p.unread = "the directory is not in a git repository, so keyhole cannot read that revision; run keyhole in a clone of the repository that holds it"
		if rr.unreadable != "" {
			p.unread = "keyhole cannot read the repository's commits (" + rr.unreadable + "); run keyhole in a clone whose objects it reads (not one made with --shared)"
		}
		return p
	case rr.head == "":
		if rev == rr.branch || branchLike && !own {
			return nil // a branch name alone, before the first commit: as written
		}
		p.unread = "the repository has no commit checked out to compare it with; check a commit out"
		return p
	case rev == rr.branch:
		return nil
	}
	ref, err := rr.repo.Resolve(rev)
	if !own && branchLike && (err != nil || ref.IsBranch()) {
		return nil // a branch name alone: as checked out
	}
	if err != nil && semverRange.MatchString(rev) {
		p.unread = "a semver range over the repository's tags, which keyhole does not resolve; pin a tag (or check the matching tag out) to have it read"
		return p
	}
	if err != nil {
		p.unread = rr.fetchHint(rev)
		p.other = other
		return p
	}
	p.ref = ref
	if ref.Commit == rr.head {
		return nil
	}
	if ref.IsBranch() {
		held, err := rr.repo.Contains(rr.head, ref.Commit)
		if err != nil {
			p.unread = "the history checked out cannot tell whether it holds that branch's tip (" + short(ref.Commit) + "); fetch the history (git fetch --unshallow, or actions/checkout with fetch-depth: 0)"
			return p
		}
		if held {
			return nil
		}
	}
	t, err := rr.repo.Tree(ref.Commit)
	if err != nil {
		p.unread = "its commit " + short(ref.Commit) + " cannot be read (" + err.Error() + ")"
		return p
	}
	p.fsys = commitFS{Tree: t, kusts: &sync.Map{}}
	return p
}

// fetchHint says what would make the revision rev, which the repository
// does not hold, readable.
func (rr *repoRevs) fetchHint(rev string) string {
	var what, fetch string
	switch {
	case tagLike.MatchString(rev):
		what, fetch = "no tag, branch or commit of the repository is "+rev, "fetch the tags (git fetch --tags, or actions/checkout with fetch-tags: true)"
	case commitLike.MatchString(rev):
		what, fetch = "the repository holds no commit "+rev, "fetch the history that holds it (git fetch --unshallow, or actions/checkout with fetch-depth: 0)"
	default:
		what, fetch = "the repository holds no tag or branch "+rev+" (local, or remote-tracking)", "fetch it (git fetch origin "+rev+", or actions/checkout with fetch-depth: 0)"
	}
	return what + "; " + fetch
}

// short is a commit hash as git shows it.
func short(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}

// closeRevs closes the repositories pinAt opened, once every unit is
// built.
func (l *loader) closeRevs() {
	for _, rr := range l.argoRevs {
		if rr.repo != nil {
			_ = rr.repo.Close()
		}
	}
	l.argoRevs = nil
}

// revisionRead is the note that the engine unit u, pinned to another
// revision, is read at that revision's commit.
func revisionRead(u *Unit) diag.Diagnostic {
	if u.Flux != nil {
		return diag.Diagnostic{Code: CodeFluxRevision, Severity: diag.Info, Pos: u.Decl, Units: []string{u.Name},
			Message: "Flux Kustomization " + strings.TrimPrefix(u.Name, "flux:") + " builds its path from " + u.pin.source + " at " + u.pin.rev +
				" (commit " + short(u.pin.ref.Commit) + "): keyhole reads it there, from git, not from the working tree"}
	}
	return diag.Diagnostic{Code: CodeArgoCDRevision, Severity: diag.Info, Pos: u.Decl, Units: []string{u.Name},
		Message: "Argo CD Application " + strings.TrimPrefix(u.Name, "argocd:") + " builds its path at targetRevision " + u.pin.rev +
			" (commit " + short(u.pin.ref.Commit) + "): keyhole reads it there, from git, not from the working tree"}
}
