package source

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"

	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"keyhole.dev/keyhole/internal/kustbuild"
)

// A kustomize build is a function of its directory, its options and what
// the filesystem answers it: every file it reads, every directory it
// lists, every path it asks about. The Memo keeps each build it is given
// with those answers, and gives it again to a build of the same directory
// and options on a filesystem that answers every one of those questions
// the same (the other side of a diff: a commit's tree, or the disk). A
// file the build never asked about changes nothing it made; a file it
// asked about, found missing, that now exists, is a different answer.
// So a reused build is the build that would have run, whichever side
// made it.
//
// What is compared is a digest of each answer: the SHA-256 of a file's
// bytes, a directory's names, a path's type and (for a file) size, an
// error's text. Permission bits and times are left out: no build reads
// them, and a commit's tree and a checkout differ in them.

// buildKey is what a build is asked besides its filesystem's answers.
type buildKey struct {
	dir, root    string
	maxSize      int64
	unrestricted bool
	kfile        string
	kdata        [sha256.Size]byte
}

// memoBuild is one build kept: its answers, and what it made, which no
// one may modify (Memo.build gives copies). Until done is closed it is
// being built, and nothing else of it may be read; ok is false when it
// cannot be reused (it wrote to its filesystem, or it panicked).
type memoBuild struct {
	done    chan struct{}
	ok      bool
	answers map[fsCall][sha256.Size]byte
	m       resmap.ResMap
	read    map[string][]byte
	err     error
}

// fsCall is one question a build asked its filesystem.
type fsCall struct {
	op   fsOp
	path string
}

type fsOp uint8

const (
	opStat fsOp = iota
	opLstat
	opReadDir
	opRead
	opReadlink
	opKIsDir
	opKExists
	opKReadDir
	opKRead
	opKCleanedAbs
	opKGlob
	opKWalk
)

// build is kustomize(fsys, dir, bo), reused from the Memo when an earlier
// build of the same key had the same answers on fsys, and kept in it
// otherwise. A build of the same key under way (the other side of a
// diff, loaded at the same time) is waited for, so that the two sides
// build each unit once. Builds that may fetch remote bases are not kept:
// what they read is not all on fsys.
func (m *Memo) build(fsys fileSystem, dir string, bo kustbuild.Options) (resmap.ResMap, map[string][]byte, error) {
	if m == nil || bo.AllowRemote {
		return kustomize(fsys, dir, bo)
	}
	key := buildKey{dir: dir, root: bo.Root, maxSize: bo.MaxSize, unrestricted: bo.Unrestricted, kfile: bo.KFile, kdata: sha256.Sum256(bo.KData)}
	// Each round looks at the builds of the key not yet looked at and, when
	// there are none, claims the key in the same step: two sides building
	// the same unit at once must find each other, the later one waiting
	// for the earlier rather than both building.
	b := &memoBuild{done: make(chan struct{})}
	for seen := 0; ; {
		m.mu.Lock()
		kept := slices.Clone(m.builds[key][seen:])
		if len(kept) == 0 {
			m.builds[key] = append(m.builds[key], b)
		}
		m.mu.Unlock()
		if len(kept) == 0 {
			break
		}
		for _, k := range kept {
			<-k.done
			if k.ok && sameAnswers(fsys, bo.Root, k.answers) {
				m.mu.Lock()
				m.buildHits++
				m.mu.Unlock()
				return copyResMap(k.m), k.read, k.err
			}
		}
		seen += len(kept)
	}
	defer close(b.done)
	rec := &recorder{fs: fsys, root: bo.Root, answers: map[fsCall][sha256.Size]byte{}}
	rm, read, err := kustomize(rec, dir, bo)
	if !rec.written() {
		b.ok, b.answers, b.m, b.read, b.err = true, rec.answers, copyResMap(rm), read, err
	}
	return rm, read, err
}

// BuildHits is how many kustomize builds were reused.
func (m *Memo) BuildHits() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.buildHits
}

func copyResMap(m resmap.ResMap) resmap.ResMap {
	if m == nil {
		return nil
	}
	return m.DeepCopy()
}

// sameAnswers reports whether fsys answers each question as answers
// record, its kustomize filesystem confined to root.
func sameAnswers(fsys fileSystem, root string, answers map[fsCall][sha256.Size]byte) bool {
	kfs, err := fsys.kustomize(root, false)
	if err != nil {
		return false
	}
	for c, want := range answers {
		if answer(fsys, kfs, c) != want {
			return false
		}
	}
	return true
}

// answer is the digest of what fsys (or its kustomize filesystem kfs)
// answers to c.
func answer(fsys fileSystem, kfs filesys.FileSystem, c fsCall) [sha256.Size]byte {
	d := newDigest(c)
	ask(fsys, kfs, c, d)
	return d.sum()
}

// ask asks fsys (or kfs) c, and adds the answer to d.
func ask(fsys fileSystem, kfs filesys.FileSystem, c fsCall, d digest) {
	switch c.op {
	case opStat:
		d.info(fsys.Stat(c.path))
	case opLstat:
		d.info(fsys.Lstat(c.path))
	case opReadDir:
		d.entries(fsys.ReadDir(c.path))
	case opRead:
		d.bytes(fsys.ReadFile(c.path))
	case opReadlink:
		d.link(fsys.readlink(c.path))
	case opKIsDir:
		d.bool(kfs.IsDir(c.path))
	case opKExists:
		d.bool(kfs.Exists(c.path))
	case opKReadDir:
		d.names(kfs.ReadDir(c.path))
	case opKRead:
		d.bytes(kfs.ReadFile(c.path))
	case opKCleanedAbs:
		d.cleaned(kfs.CleanedAbs(c.path))
	case opKGlob:
		d.names(kfs.Glob(c.path))
	case opKWalk:
		err := kfs.Walk(c.path, func(p string, fi fs.FileInfo, err error) error {
			d.str(p)
			d.info(fi, err)
			return nil
		})
		d.err(err)
	}
}

// digest hashes an answer, each part length-prefixed so that no two
// answers run together into the same bytes.
type digest struct{ h hash.Hash }

func newDigest(c fsCall) digest {
	d := digest{sha256.New()}
	d.h.Write([]byte{byte(c.op)})
	d.str(c.path)
	return d
}

func (d digest) sum() [sha256.Size]byte {
	var sum [sha256.Size]byte
	d.h.Sum(sum[:0])
	return sum
}

func (d digest) str(s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	d.h.Write(n[:])
	d.h.Write([]byte(s))
}

func (d digest) bool(b bool) {
	if b {
		d.str("true")
	} else {
		d.str("false")
	}
}

// err records an error by its text and by whether it says the path does
// not exist, which is what callers branch on.
func (d digest) err(err error) {
	if err == nil {
		d.str("")
		return
	}
	d.str("error")
	d.bool(errors.Is(err, fs.ErrNotExist))
	d.str(err.Error())
}

// info records a path's type and, for what is not a directory, its size.
func (d digest) info(fi fs.FileInfo, err error) {
	d.err(err)
	if err != nil || fi == nil {
		return
	}
	d.str(fi.Name())
	d.str(fi.Mode().Type().String())
	if !fi.IsDir() {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(fi.Size()))
		d.h.Write(n[:])
	}
}

func (d digest) entries(es []fs.DirEntry, err error) {
	d.err(err)
	for _, e := range es {
		d.info(e.Info())
	}
}

func (d digest) names(ns []string, err error) {
	d.err(err)
	for _, n := range ns {
		d.str(n)
	}
}

func (d digest) bytes(b []byte, err error) {
	d.err(err)
	if err == nil {
		sum := sha256.Sum256(b)
		d.h.Write(sum[:])
	}
}

func (d digest) link(target string, err error) { d.bytes([]byte(target), err) }

func (d digest) cleaned(dir filesys.ConfirmedDir, file string, err error) {
	d.names([]string{string(dir), file}, err)
}

// recorder is a fileSystem that notes the digest of each answer it gives
// a build, the first time each question is asked. One build uses it at a
// time; its kustomize filesystem notes into the same answers.
type recorder struct {
	fs fileSystem
	// root is the build's (kustbuild.Options.Root).
	root    string
	mu      sync.Mutex
	answers map[fsCall][sha256.Size]byte
	wrote   bool
	// kusts are the recorder's own: a kustomization parsed through the
	// loader's filesystem would not be recorded as read.
	kusts sync.Map
}

// keep notes the answer to (op, path) that fill adds to a digest, unless
// that question was asked before.
func (r *recorder) keep(op fsOp, path string, fill func(digest)) {
	c := fsCall{op, path}
	r.mu.Lock()
	_, ok := r.answers[c]
	r.mu.Unlock()
	if ok {
		return
	}
	d := newDigest(c)
	fill(d)
	r.mu.Lock()
	r.answers[c] = d.sum()
	r.mu.Unlock()
}

// note is keep for an answer given as a stream (a file opened, a walk),
// which is asked again, whole, to be digested.
func (r *recorder) note(op fsOp, path string) {
	kfs, err := r.fs.kustomize(r.root, false)
	if err != nil {
		r.taint()
		return
	}
	r.keep(op, path, func(d digest) { ask(r.fs, kfs, fsCall{op, path}, d) })
}

func (r *recorder) taint() {
	r.mu.Lock()
	r.wrote = true
	r.mu.Unlock()
}

func (r *recorder) written() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrote
}

func (r *recorder) Stat(name string) (fs.FileInfo, error) {
	fi, err := r.fs.Stat(name)
	r.keep(opStat, name, func(d digest) { d.info(fi, err) })
	return fi, err
}

func (r *recorder) Lstat(name string) (fs.FileInfo, error) {
	fi, err := r.fs.Lstat(name)
	r.keep(opLstat, name, func(d digest) { d.info(fi, err) })
	return fi, err
}

func (r *recorder) Open(name string) (fs.File, error) {
	r.note(opRead, name)
	return r.fs.Open(name)
}

func (r *recorder) ReadDir(name string) ([]fs.DirEntry, error) {
	es, err := r.fs.ReadDir(name)
	r.keep(opReadDir, name, func(d digest) { d.entries(es, err) })
	return es, err
}

func (r *recorder) ReadFile(name string) ([]byte, error) {
	b, err := r.fs.ReadFile(name)
	r.keep(opRead, name, func(d digest) { d.bytes(b, err) })
	return b, err
}

func (r *recorder) readlink(name string) (string, error) {
	target, err := r.fs.readlink(name)
	r.keep(opReadlink, name, func(d digest) { d.link(target, err) })
	return target, err
}

func (r *recorder) kustomizations() *sync.Map { return &r.kusts }

func (r *recorder) kustomize(root string, allowRemote bool) (filesys.FileSystem, error) {
	kfs, err := r.fs.kustomize(root, allowRemote)
	if err != nil {
		return nil, err
	}
	return recordingKFS{kfs: kfs, r: r}, nil
}

// recordingKFS is the recorder's kustomize filesystem. A build that
// writes (none should) is not kept.
type recordingKFS struct {
	kfs filesys.FileSystem
	r   *recorder
}

var _ filesys.FileSystem = recordingKFS{}

func (k recordingKFS) Create(p string) (filesys.File, error) {
	k.r.taint()
	return k.kfs.Create(p)
}

func (k recordingKFS) Mkdir(p string) error {
	k.r.taint()
	return k.kfs.Mkdir(p)
}

func (k recordingKFS) MkdirAll(p string) error {
	k.r.taint()
	return k.kfs.MkdirAll(p)
}

func (k recordingKFS) RemoveAll(p string) error {
	k.r.taint()
	return k.kfs.RemoveAll(p)
}

func (k recordingKFS) WriteFile(p string, data []byte) error {
	k.r.taint()
	return k.kfs.WriteFile(p, data)
}

func (k recordingKFS) Open(p string) (filesys.File, error) {
	k.r.note(opKRead, p)
	return k.kfs.Open(p)
}

func (k recordingKFS) IsDir(p string) bool {
	is := k.kfs.IsDir(p)
	k.r.keep(opKIsDir, p, func(d digest) { d.bool(is) })
	return is
}

func (k recordingKFS) ReadDir(p string) ([]string, error) {
	names, err := k.kfs.ReadDir(p)
	k.r.keep(opKReadDir, p, func(d digest) { d.names(names, err) })
	return names, err
}

func (k recordingKFS) CleanedAbs(p string) (filesys.ConfirmedDir, string, error) {
	dir, file, err := k.kfs.CleanedAbs(p)
	k.r.keep(opKCleanedAbs, p, func(d digest) { d.cleaned(dir, file, err) })
	return dir, file, err
}

func (k recordingKFS) Exists(p string) bool {
	exists := k.kfs.Exists(p)
	k.r.keep(opKExists, p, func(d digest) { d.bool(exists) })
	return exists
}

func (k recordingKFS) Glob(pattern string) ([]string, error) {
	names, err := k.kfs.Glob(pattern)
	k.r.keep(opKGlob, pattern, func(d digest) { d.names(names, err) })
	return names, err
}

func (k recordingKFS) ReadFile(p string) ([]byte, error) {
	b, err := k.kfs.ReadFile(p)
	k.r.keep(opKRead, p, func(d digest) { d.bytes(b, err) })
	return b, err
}

func (k recordingKFS) Walk(p string, walkFn filepath.WalkFunc) error {
	k.r.note(opKWalk, p)
	return k.kfs.Walk(p, walkFn)
}

func (r *recorder) tracked(root string) func(string) bool { return r.fs.tracked(root) }
