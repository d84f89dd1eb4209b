package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"keyhole.dev/keyhole/internal/gitfs"
	"keyhole.dev/keyhole/internal/testrepo"
)

// endsWithin fails the test when f takes longer than d: the attacks below
// ran until the runner's memory or patience ran out.
func endsWithin(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still loading after %s", d)
	}
}

// TestGitBomb: a commit whose tree names one directory over and over (a
// billion Connections in a few kilobytes, which a pull request can push
// and keyhole reads from git, never from a checkout) is not read: as the
// commit keyhole diff compares, it is unreadable input; as the revision
// a Flux Kustomization pins, an error at the Kustomization, nothing of
// it read. Either ends in seconds; each ran for ever, its memory
// growing, before reads of a commit were bounded (gitfs.MaxListedEntries).
func TestGitBomb(t *testing.T) {
	conn := argoConn("kept")
	t.Run("the commit compared", func(t *testing.T) {
		dir, r := gitRepo(t)
		writeFiles(t, dir, map[string]string{"apps/conn.yaml": conn})
		commitAll(t, r, "first")
		bomb := testrepo.CommitBomb(t, r, "apps", 8, 10, conn).String()
		tree := treeAt(t, dir, bomb)
		defer tree.Close()
		endsWithin(t, time.Minute, func() {
			docs, _, err := testLoad([]string{"."}, Options{Dir: dir, Tree: tree})
			if !errors.Is(err, ErrUnreadable) || !errors.Is(err, gitfs.ErrTreeTooLarge) {
				t.Errorf("Load: %v, want ErrUnreadable and ErrTreeTooLarge", err)
			}
			if len(docs) != 0 {
				t.Errorf("read %d documents of a commit not read whole", len(docs))
			}
		})
	})
	t.Run("a revision a Flux Kustomization pins", func(t *testing.T) {
		dir, r := gitRepo(t)
		writeFiles(t, dir, map[string]string{"apps/conn.yaml": conn})
		commitAll(t, r, "first")
		bomb := testrepo.CommitBomb(t, r, "apps", 8, 10, conn).String()
		sync := "apiVersion: source.toolkit.fluxcd.io/v1\nkind: GitRepository\nmetadata: {name: flux-system, namespace: flux-system}\n" +
			"spec: {interval: 1m, url: 'https://git.example.com/r.git', ref: {commit: " + bomb + "}}\n---\n" +
			"apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
			"spec: {interval: 10m, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}\n"
		endsWithin(t, time.Minute, func() {
			assertPinRead(t, dir, "clusters/prod/sync.yaml", sync, "KustomizeBuildFailed", "",
				"error KustomizeBuildFailed: Flux cannot generate the kustomization of flux-system/apps: the path holds more than 8192 files, more than keyhole lays out to build a commit's Flux path")
		})
	})
	t.Run("a revision an Argo CD Application pins", func(t *testing.T) {
		dir, r := gitRepo(t)
		if _, err := r.CreateRemote(&gitconfig.RemoteConfig{Name: "origin", URLs: []string{"https://git.example.com/acme/agents.git"}}); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, dir, map[string]string{"apps/conn.yaml": conn})
		commitAll(t, r, "first")
		bomb := testrepo.CommitBomb(t, r, "apps", 8, 10, conn).String()
		app := "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: apps, namespace: argocd}\n" +
			"spec:\n  project: default\n  source: {repoURL: 'https://git.example.com/acme/agents.git', path: apps, targetRevision: '" + bomb + "', directory: {recurse: true}}\n" +
			"  destination: {name: in-cluster, namespace: agents}\n"
		endsWithin(t, time.Minute, func() {
			assertPinRead(t, dir, "argocd/apps.yaml", app, "InputInvalid", "",
				"error InputInvalid: the commit "+bomb[:12]+" that "+bomb+" names cannot be read whole: the commit's directories hold more than")
		})
	})
}

// TestGitTreeEntryNames: a commit whose Flux path holds a directory
// naming itself "." (a tree entry git never checks out, but a pull
// request can push) is unreadable input. Laying the path out for Flux's
// generator, keyhole recursed into the directory for ever and died of a
// stack overflow after 1.5 GB.
func TestGitTreeEntryNames(t *testing.T) {
	dir, r := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"apps/conn.yaml":     argoConn("kept"),
		"apps/sub/notes.txt": "no YAML here\n",
		"clusters/apps.yaml": "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: apps, namespace: flux-system}\n" +
			"spec: {interval: 10m, path: ./apps, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}\n",
	})
	head, err := r.CommitObject(commitAll(t, r, "first"))
	if err != nil {
		t.Fatal(err)
	}
	top, err := head.Tree()
	if err != nil {
		t.Fatal(err)
	}
	// apps/sub gains an entry "." naming apps/sub's own tree.
	apps, err := top.Tree("apps")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := apps.Tree("sub")
	if err != nil {
		t.Fatal(err)
	}
	newSub := testrepo.Store(t, r.Storer, &object.Tree{Entries: append([]object.TreeEntry{{Name: ".", Mode: filemode.Dir, Hash: sub.Hash}}, sub.Entries...)})
	newApps := object.Tree{Entries: slices.Clone(apps.Entries)}
	newTop := object.Tree{Entries: slices.Clone(top.Entries)}
	for i := range newApps.Entries {
		if newApps.Entries[i].Name == "sub" {
			newApps.Entries[i].Hash = newSub
		}
	}
	for i := range newTop.Entries {
		if newTop.Entries[i].Name == "apps" {
			newTop.Entries[i].Hash = testrepo.Store(t, r.Storer, &newApps)
		}
	}
	sig := testrepo.Signature()
	c := testrepo.Store(t, r.Storer, &object.Commit{Author: *sig, Committer: *sig, Message: "dot", TreeHash: testrepo.Store(t, r.Storer, &newTop)})
	tree := treeAt(t, dir, c.String())
	defer tree.Close()
	endsWithin(t, time.Minute, func() {
		_, _, err := testLoad([]string{"."}, Options{Dir: dir, Tree: tree})
		if !errors.Is(err, ErrUnreadable) || !errors.Is(err, gitfs.ErrEntryName) {
			t.Errorf("Load: %v, want ErrUnreadable and ErrEntryName", err)
		}
	})
}

// TestLinkLoops: directories holding links back up the tree (a -> .,
// b -> .), each the path of a Flux Kustomization. The scope questions
// asked of a unit's path before it is built (does it name keyhole's
// kinds, what may its build read) followed both links at every level,
// 2^40 paths, cut only at 20,000 visits, each resolving every link from
// the root: about 10 s a unit (48 s on a loaded machine), so a few kilobytes of Kustomizations held
// the CI job for hours. Each directory is now read once, where its links
// land. On disk and as a commit.
func TestLinkLoops(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows makes no symbolic links without a privilege the test lacks, and the loops are links; make test runs on Linux")
	}
	const units = 8
	files := map[string]string{}
	var kustomizations strings.Builder
	for i := range units {
		fmt.Fprintf(&kustomizations, "---\napiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: loop%d, namespace: flux-system}\n"+
			"spec: {interval: 10m, path: ./loop%d, prune: true, sourceRef: {kind: GitRepository, name: flux-system}}\n", i, i)
		files[fmt.Sprintf("loop%d/README.md", i)] = "no YAML here\n"
	}
	files["clusters/apps.yaml"] = kustomizations.String()
	dir, r := gitRepo(t)
	writeFiles(t, dir, files)
	for i := range units {
		for _, name := range []string{"a", "b"} {
			if err := os.Symlink(".", filepath.Join(dir, fmt.Sprintf("loop%d", i), name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	commitAll(t, r, "loops")
	for name, opts := range map[string]Options{
		"on disk":     {Dir: dir},
		"as a commit": {Dir: dir, Tree: headTree(t, dir)},
	} {
		t.Run(name, func(t *testing.T) {
			endsWithin(t, 30*time.Second, func() {
				if _, _, err := testLoad([]string{"."}, opts); err != nil {
					t.Errorf("Load: %v", err)
				}
			})
		})
	}
}

// TestAppSetLinkLoops: an ApplicationSet git directories generator over
// a directory holding two links back up the tree (a -> ., b -> .) listed
// 2^40 directories, and check never ended.
func TestAppSetLinkLoops(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("Windows makes no symbolic links without a privilege the test lacks, and the loops are links; make test runs on Linux")
	}
	dir, _ := gitRepo(t)
	writeFiles(t, dir, map[string]string{
		"apps/web/conn.yaml": argoConn("kept"),
		"argocd/appset.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: ApplicationSet\nmetadata: {name: s, namespace: argocd}\nspec:\n  goTemplate: true\n" +
			"  generators:\n  - git: {repoURL: 'https://git.example.com/acme/agents.git', revision: HEAD, directories: [{path: 'apps/*'}]}\n" +
			"  template:\n    metadata: {name: 'x-{{ .path.basename }}'}\n    spec:\n      project: default\n" +
			"      source: {repoURL: 'https://git.example.com/acme/agents.git', path: '{{ .path.path }}', targetRevision: HEAD}\n" +
			"      destination: {name: in-cluster, namespace: agents}\n",
	})
	for _, name := range []string{"a", "b"} {
		if err := os.Symlink(".", filepath.Join(dir, "apps", name)); err != nil {
			t.Fatal(err)
		}
	}
	endsWithin(t, 30*time.Second, func() {
		if _, _, err := testLoad([]string{"."}, Options{Dir: dir}); err != nil {
			t.Errorf("Load: %v", err)
		}
	})
}
