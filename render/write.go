package render

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// markerText is the content of MarkerFile.
const markerText = "This directory is written by `keyhole render`; each render replaces all of it.\n"

// checkFiles refuses paths that could escape the output directory, clash
// with the marker, repeat, or need a file to also be a directory.
func checkFiles(files []File) error {
	seen := make(map[string]bool, len(files))
	for _, f := range files {
		p := f.Path
		if err := checkPath(p); err != nil {
			return err
		}
		switch {
		case p == MarkerFile:
			return fmt.Errorf("%w: %q is the marker WriteDir writes", ErrInvalidFile, p)
		case seen[p]:
			return fmt.Errorf("%w: %q is listed twice", ErrInvalidFile, p)
		}
		seen[p] = true
	}
	for _, f := range files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			if seen[d] {
				return fmt.Errorf("%w: %q is both a file and the directory of %q", ErrInvalidFile, d, f.Path)
			}
		}
	}
	return nil
}

// checkPath refuses a path that is not clean, relative and inside the
// output directory.
func checkPath(p string) error {
	switch {
	case p == "" || p == ".":
		return fmt.Errorf("%w: empty path", ErrInvalidFile)
	case strings.HasPrefix(p, "/") || strings.Contains(p, `\`) || path.Clean(p) != p:
		return fmt.Errorf("%w: %q is not a clean relative slash-separated path", ErrInvalidFile, p)
	case p == ".." || strings.HasPrefix(p, "../"):
		return fmt.Errorf("%w: %q leaves the output directory", ErrInvalidFile, p)
	}
	return nil
}

// WriteDir replaces dir with exactly files, atomically: it writes them
// into a new sibling directory, then swaps it for dir with two renames,
// so a failure at any step leaves dir as it was. It writes MarkerFile too,
// and it refuses (ErrNotOwned) to replace a directory that is not empty
// and has no marker, so files keyhole did not write are never deleted.
// Between the two renames dir is briefly absent; readers that must never
// see that should read a symlink the caller swaps instead.
func WriteDir(dir string, files []File) error {
	if len(files) == 0 {
		return fmt.Errorf("%w: no files to write", ErrEmpty)
	}
	if err := checkFiles(files); err != nil {
		return err
	}
	w := NewDirWriter(dir)
	put := w.Unit("")
	for _, f := range files {
		if err := put(f); err != nil {
			break // Commit returns it
		}
	}
	_, err := w.Commit()
	return err
}

// A DirWriter replaces a directory with a render's files as WriteDir
// does, taking them as they are rendered (Options.Put) rather than all at
// once: each deploy unit's files are staged beside the directory as they
// come, and Commit places them as Layout would (one unit's at the top,
// several units' each under the unit's directory) and swaps them in.
// Until Commit, the directory is as it was; Abort, or a failed Commit,
// removes what was staged. Its methods are safe for concurrent use.
type DirWriter struct {
	dir string

	mu sync.Mutex
	// err is the first failure, returned by Commit; nothing is staged
	// after it.
	err error
	// stage is the directory the files are staged in, "" until the
	// first file; each unit's go to stage/<its index>.
	stage  string
	target target
	units  []*stagedUnit
}

// stagedUnit is the files of one deploy unit staged so far, and the
// directory its files go to among several units.
type stagedUnit struct {
	dir   string
	paths []string
	// fixed says the files go to dir even when no other unit has any
	// (UnitAt).
	fixed bool
}

// NewDirWriter returns a DirWriter that replaces dir. It touches nothing
// until the first file.
func NewDirWriter(dir string) *DirWriter {
	return &DirWriter{dir: dir}
}

// Unit returns the Options.Put of one deploy unit, whose files go to
// dir among several units (its source.Unit's Dir: "" for the loose
// files, which go to the top). A unit that puts no file does not count.
// The error it returns is the first of the DirWriter, which stages
// nothing more; Commit returns it too.
func (w *DirWriter) Unit(dir string) func(File) error {
	return w.unit(dir, false)
}

// UnitAt is Unit for a deploy unit whose files go to dir even when it is
// the only one written: a directory an Argo CD Application points at
// stays where it is however many units the next render writes.
func (w *DirWriter) UnitAt(dir string) func(File) error {
	return w.unit(dir, true)
}

func (w *DirWriter) unit(dir string, fixed bool) func(File) error {
	var u *stagedUnit
	index := 0
	return func(f File) error {
		w.mu.Lock()
		if w.err == nil && u == nil {
			u = &stagedUnit{dir: dir, fixed: fixed}
			index = len(w.units)
			w.units = append(w.units, u)
		}
		if w.err == nil && w.stage == "" {
			w.target, w.stage, w.err = prepare(w.dir)
		}
		if w.err == nil {
			w.err = checkPath(f.Path)
		}
		if w.err != nil {
			err := w.err
			w.mu.Unlock()
			return err
		}
		u.paths = append(u.paths, f.Path)
		root := filepath.Join(w.stage, strconv.Itoa(index))
		w.mu.Unlock()
		// Two units' files are staged apart, and a unit has each path
		// once (Commit refuses it otherwise), so writes need no lock.
		if err := stageFile(root, f.Path, f.Data); err != nil {
			w.mu.Lock()
			if w.err == nil {
				w.err = err
			}
			w.mu.Unlock()
			return err
		}
		return nil
	}
}

// Abort removes what was staged; the directory stays as it was.
func (w *DirWriter) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stage != "" {
		os.RemoveAll(w.stage)
		w.target.unmake()
	}
	if w.err == nil {
		w.err = errors.New("render aborted")
	}
}

// Commit places the staged files, checks them as WriteDir checks its
// files, and swaps them in for the directory; it returns how many files
// it wrote (MarkerFile aside). After a failure the directory is as it
// was and nothing staged is left.
func (w *DirWriter) Commit() (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		if w.stage != "" {
			os.RemoveAll(w.stage)
			w.target.unmake()
		}
		return 0, w.err
	}
	n, err := w.commit()
	if w.stage != "" {
		os.RemoveAll(w.stage)
		if err != nil {
			w.target.unmake()
		}
	}
	w.err = errors.New("render already committed")
	if err != nil {
		w.err = err
	}
	return n, err
}

// commit is Commit once nothing has failed before it.
func (w *DirWriter) commit() (int, error) {
	var placed []File
	nested := len(w.units) > 1 || len(w.units) == 1 && w.units[0].fixed && w.units[0].dir != ""
	for _, u := range w.units {
		for _, p := range u.paths {
			if nested && u.dir != "" {
				p = path.Join(u.dir, p)
			}
			placed = append(placed, File{Path: p})
		}
	}
	if len(placed) == 0 {
		return 0, fmt.Errorf("%w: no files to write", ErrEmpty)
	}
	if err := checkFiles(placed); err != nil {
		return 0, err
	}
	root := filepath.Join(w.stage, "0")
	if nested {
		root = filepath.Join(w.stage, "all")
		i := 0
		for ui, u := range w.units {
			from := filepath.Join(w.stage, strconv.Itoa(ui))
			for _, p := range u.paths {
				to := filepath.Join(root, filepath.FromSlash(placed[i].Path))
				i++
				if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
					return 0, fmt.Errorf("staging %s: %w", placed[i-1].Path, err)
				}
				if err := os.Rename(filepath.Join(from, filepath.FromSlash(p)), to); err != nil {
					return 0, fmt.Errorf("staging %s: %w", placed[i-1].Path, err)
				}
			}
		}
	}
	if err := stageFile(root, MarkerFile, []byte(markerText)); err != nil {
		return 0, err
	}
	if err := w.target.swap(root); err != nil {
		return 0, err
	}
	return len(placed), nil
}

// target is where a render goes: the directory, whether it exists, with
// what permissions, and its parent and name, beside which it is staged.
type target struct {
	dir, parent, base string
	mode              fs.FileMode
	exists            bool
	// made are the parent directories made for the render, deepest first.
	made []string
}

// unmake removes the parent directories made for a render that failed,
// those still empty.
func (t target) unmake() {
	for _, d := range t.made {
		if os.Remove(d) != nil {
			return
		}
	}
}

// prepare checks that dir may be replaced by a render and makes the
// directory beside it to stage the render in.
func prepare(dir string) (target, string, error) {
	dir = filepath.Clean(dir)
	t := target{dir: dir, parent: filepath.Dir(dir), base: filepath.Base(dir), mode: 0o755}
	if t.base == "." || t.base == ".." || t.base == string(filepath.Separator) {
		return t, "", fmt.Errorf("output directory %q cannot be replaced; name a directory below it", dir)
	}
	if link := linkOnPath(dir); link != "" {
		return t, "", fmt.Errorf("output directory %q: %s is a symbolic link, which render does not write through (a link a repository commits may lead anywhere); name a directory reached without links", dir, link)
	}
	switch info, err := os.Lstat(dir); {
	case err == nil:
		if !info.IsDir() {
			return t, "", fmt.Errorf("output %q is not a directory", dir)
		}
		if err := checkOwned(dir); err != nil {
			return t, "", err
		}
		t.mode = info.Mode().Perm()
		t.exists = true
	case errors.Is(err, fs.ErrNotExist):
	default:
		return t, "", fmt.Errorf("output directory: %w", err)
	}
	// -o a/b/c where a/b does not exist yet: make it, as mkdir -p would,
	// for the staged tree to sit next to where it goes; a render that
	// fails removes it again (target.made).
	for d := t.parent; ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil || filepath.Dir(d) == d {
			break
		}
		t.made = append(t.made, d)
	}
	if err := os.MkdirAll(t.parent, 0o755); err != nil {
		return t, "", fmt.Errorf("making the output directory's parent: %w", err)
	}
	stage, err := os.MkdirTemp(t.parent, "."+t.base+".keyhole-new-")
	if err != nil {
		return t, "", fmt.Errorf("staging the render next to %q: %w", dir, err)
	}
	return t, stage, nil
}

// swap puts the staged tree root in the target's place, with two renames
// when a previous render is there.
func (t target) swap(root string) error {
	if err := os.Chmod(root, t.mode); err != nil {
		return fmt.Errorf("staging the render: %w", err)
	}
	if !t.exists {
		if err := os.Rename(root, t.dir); err != nil {
			return fmt.Errorf("moving the render into place: %w", err)
		}
		removeStale(t.parent, t.base, time.Now())
		return nil
	}
	// The previous render moves into a fresh directory of its own, so no
	// other process can have taken the name it moves to.
	old, err := os.MkdirTemp(t.parent, "."+t.base+".keyhole-old-")
	if err != nil {
		return fmt.Errorf("making room for the previous render: %w", err)
	}
	prev := filepath.Join(old, t.base)
	if err := os.Rename(t.dir, prev); err != nil {
		os.Remove(old)
		return fmt.Errorf("moving the previous render aside: %w", err)
	}
	if err := os.Rename(root, t.dir); err != nil {
		if rerr := os.Rename(prev, t.dir); rerr != nil {
			return fmt.Errorf("moving the render into place: %w; the previous render is left in %q: %w", err, prev, rerr)
		}
		os.Remove(old)
		return fmt.Errorf("moving the render into place: %w", err)
	}
	// The new render is in place; a leftover old tree is only clutter, so
	// failing to remove it does not fail the write.
	os.RemoveAll(old)
	removeStale(t.parent, t.base, time.Now())
	return nil
}

// linkOnPath returns the first element of dir that is a symbolic link,
// "" when none is. The elements checked are those dir names below the
// working directory (all of a relative dir; of an absolute one, those
// under the working directory): what a repository's checkout can hold.
// What lies above it is the machine's, not the repository's.
func linkOnPath(dir string) string {
	rel := dir
	if filepath.IsAbs(dir) {
		wd, err := os.Getwd()
		if err != nil {
			return ""
		}
		r, err := filepath.Rel(wd, dir)
		if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
			return ""
		}
		rel = r
	}
	cur := ""
	for _, e := range strings.Split(filepath.Clean(rel), string(filepath.Separator)) {
		if e == "." || e == "" {
			continue
		}
		if e == ".." {
			cur = filepath.Join(cur, e)
			continue
		}
		cur = filepath.Join(cur, e)
		info, err := os.Lstat(cur)
		if err != nil {
			return "" // from here on nothing exists: MkdirAll makes it
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return cur
		}
	}
	return ""
}

// staleAfter is how old a staged or set-aside tree of an earlier render
// must be for a later render to remove it. A render's own trees live for
// the seconds it takes to write; one left older than this was left by a
// render that was killed (kill -9, a lost machine) between staging and
// cleaning up, and a render running beside this one is never this old.
const staleAfter = 10 * time.Minute

// removeStale removes what killed renders of dir left beside it: the
// directories .BASE.keyhole-new-* and .BASE.keyhole-old-* that WriteDir
// makes, once older than staleAfter. It runs after a render is in place,
// so what it removes is never the only copy of the output. Like the old
// tree's removal, a failure here does not fail the write.
func removeStale(parent, base string, now time.Time) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || (!strings.HasPrefix(name, "."+base+".keyhole-new-") && !strings.HasPrefix(name, "."+base+".keyhole-old-")) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < staleAfter {
			continue
		}
		os.RemoveAll(filepath.Join(parent, name))
	}
}

// checkOwned refuses a non-empty directory without MarkerFile.
func checkOwned(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	if len(entries) == 0 {
		return nil
	}
	info, err := os.Lstat(filepath.Join(dir, MarkerFile))
	if err != nil || !info.Mode().IsRegular() {
		return fmt.Errorf("%w: %q is not empty and has no %s; remove it or choose an empty directory", ErrNotOwned, dir, MarkerFile)
	}
	return nil
}

// stageFile writes one file of the staged tree root.
func stageFile(root, rel string, data []byte) error {
	p := filepath.Join(root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("staging %s: %w", rel, err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("staging %s: %w", rel, err)
	}
	return nil
}

// Stream joins the Kubernetes objects among files, in Path order, into one
// YAML stream: what `keyhole render --stdout` prints for an Argo CD config
// management plugin. Only *.yaml files are objects; kustomization.yaml is
// a build instruction, not an object, and is left out. An empty stream is
// an error (ErrEmpty), since Argo CD would prune every object it manages.
func Stream(files []File) ([]byte, error) {
	streamed, size, err := streamFiles(files)
	if err != nil {
		return nil, err
	}
	// One allocation of the whole stream: growing a buffer of tens of
	// megabytes by doubling cost a render as much as its YAML encoding.
	b := bytes.NewBuffer(make([]byte, 0, size))
	if err := writeStream(b, streamed); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteStream writes to w the stream Stream returns, without holding it
// whole in memory: at 10,000 Connections the stream is tens of megabytes,
// and allocating and filling it cost a render more than writing it did.
// Nothing is written when the stream would be empty (ErrEmpty). An error
// from w can leave part of the stream written, as any failed write can.
func WriteStream(w io.Writer, files []File) error {
	streamed, _, err := streamFiles(files)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	if err := writeStream(bw, streamed); err != nil {
		return err
	}
	return bw.Flush()
}

// streamFiles returns the files a stream holds, in Path order, and the
// stream's size; ErrEmpty when there are none.
func streamFiles(files []File) ([]File, int, error) {
	streamed := make([]File, 0, len(files))
	size := 0
	for _, f := range sortedFiles(files) {
		if !strings.HasSuffix(f.Path, ".yaml") || path.Base(f.Path) == "kustomization.yaml" {
			continue
		}
		if len(bytes.TrimSpace(f.Data)) == 0 {
			continue
		}
		streamed = append(streamed, f)
		size += len("---\n") + len(f.Data) + 1
	}
	if len(streamed) == 0 {
		return nil, 0, fmt.Errorf("%w: no Kubernetes objects to stream", ErrEmpty)
	}
	return streamed, size, nil
}

func writeStream(w io.Writer, streamed []File) error {
	for _, f := range streamed {
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		if _, err := w.Write(f.Data); err != nil {
			return err
		}
		if !bytes.HasSuffix(f.Data, []byte("\n")) {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
	}
	return nil
}

// byPath orders files by path.
func byPath(a, b File) int { return strings.Compare(a.Path, b.Path) }

func sortedFiles(files []File) []File {
	if slices.IsSortedFunc(files, byPath) {
		// As Render returns them; its callers only read the result.
		return files
	}
	out := slices.Clone(files)
	slices.SortStableFunc(out, byPath)
	return out
}

// withKustomization adds to the files of a target's render the
// kustomization.yaml listing resources, and sorts them by path.
func withKustomization(files []File, header string, resources []string) ([]File, error) {
	k, err := kustomization(header, resources)
	if err != nil {
		return nil, err
	}
	files = append(files, k)
	slices.SortFunc(files, byPath)
	return files, nil
}

// kustomization is the kustomization.yaml of a render: header (comment
// lines, or "") and a Kustomization listing resources, sorted, so that
// `kubectl apply -k` takes the whole render. Both targets write theirs
// here.
func kustomization(header string, resources []string) (File, error) {
	sorted := slices.Sorted(slices.Values(resources))
	// A render of thousands of sandboxes lists tens of thousands of
	// files: size the buffer once rather than grow it by doubling.
	size := len(header) + 128
	for _, r := range resources {
		size += len("- ") + len(r) + 3
	}
	e := emitter{buf: make([]byte, 0, size)}
	e.buf = append(e.buf, header...)
	if err := e.value(obj{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"resources":  sorted,
	}, 0, false); err != nil {
		return File{}, fmt.Errorf("encoding YAML: %w", err)
	}
	return File{Path: "kustomization.yaml", Data: e.buf}, nil
}
