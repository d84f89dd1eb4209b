package source

import (
	"crypto/sha256"
	"slices"
	"sync"

	"keyhole.dev/keyhole/diag"
)

// Memo remembers what parsing files gave, by the file's reported name and
// the SHA-256 of its bytes, so that a second Load of mostly the same files
// (the other side of a diff) takes the documents instead of parsing them
// again. Parsing reads nothing but the name and the bytes, so a file of
// the same name and bytes parses to the same documents and diagnostics,
// whether it was read from a commit or from disk: the bytes are hashed as
// read, never taken on a tree entry's word. The documents it gives share
// their nodes with the Load that parsed them; nothing may modify them.
// They also carry what
// that Load's Options.Digest took of them, released or not as it said, so
// every Load given one Memo must be given the same Digest (or none); a
// released one reads its tree again as the Load that parsed it would,
// from a file of the same name and bytes. Set it in Options.Memo; it is
// safe for concurrent use.
//
// It also keeps kustomize's builds, given again to a build asking the same
// of a filesystem that answers the same (buildmemo.go).
type Memo struct {
	mu        sync.Mutex
	parsed    map[memoKey]*memoParsed
	hits      int
	builds    map[buildKey][]*memoBuild
	buildHits int
}

type memoKey struct {
	name   string
	walked bool
	sum    [sha256.Size]byte
}

// memoParsed is a file's parse; until done is closed it is under way,
// and nothing else of it may be read. ok is false when it did not finish
// (it panicked).
type memoParsed struct {
	done  chan struct{}
	ok    bool
	docs  []Document
	diags diag.List
}

// NewMemo returns an empty Memo.
func NewMemo() *Memo {
	return &Memo{parsed: map[memoKey]*memoParsed{}, builds: map[buildKey][]*memoBuild{}}
}

// Hits is how many files' parses were reused.
func (m *Memo) Hits() int {
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.hits
}

// parse is parse(name, data, walked, each), reusing an earlier parse of
// the same name and bytes and what each did to its documents, or waiting
// for one under way (the other side of a diff, loaded at the same time).
// The slices returned are the caller's own.
func (m *Memo) parse(name string, data []byte, walked bool, each func(*Document)) ([]Document, diag.List) {
	if m == nil {
		return parse(name, data, walked, each)
	}
	key := memoKey{name: name, walked: walked, sum: sha256.Sum256(data)}
	m.mu.Lock()
	p, ok := m.parsed[key]
	if ok {
		m.hits++
	} else {
		p = &memoParsed{done: make(chan struct{})}
		m.parsed[key] = p
	}
	m.mu.Unlock()
	if ok {
		if <-p.done; !p.ok {
			return parse(name, data, walked, each)
		}
		return slices.Clone(p.docs), slices.Clone(p.diags)
	}
	defer close(p.done)
	p.docs, p.diags = parse(name, data, walked, each)
	p.ok = true
	return slices.Clone(p.docs), slices.Clone(p.diags)
}
