package proxy

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
)

// secretWatch caches Secret values and keeps the cache honest with
// inotify. Before each lookup it drains its inotify descriptor without
// blocking: any event at all — a ..data swap, a key written in place,
// removed or renamed, the directory itself going away, or a queue overflow
// — empties the cache, so the value read afterwards is the one on disk.
//
// The kernel queues an event before the syscall that caused it returns,
// so a change that happened before a request arrived is always seen by
// that request's drain: the "next request sees the rotation" promise of
// the stat cache holds, at the price of one read that returns EAGAIN
// instead of a stat that walks the path through two symbolic links. The
// drain, the lookup and the fill run under one mutex, so no lookup can be
// served from a cache another lookup is about to empty.
//
// Watches are added before a value is read: on the secrets directory, on
// the key's directory (where the kubelet renames ..data), on the file the
// key resolves to and on that file's directory. Events from reading the
// file ourselves (open, access, close without writing) are not asked for.
type secretWatch struct {
	mu      sync.Mutex
	fd      int
	vals    map[string]Secret // path → value, valid until the next event
	watched map[string]bool   // paths with a watch since the last event
	broken  bool              // the descriptor failed: every lookup goes to the stat cache
	buf     []byte
}

const (
	watchFileMask = syscall.IN_MODIFY | syscall.IN_ATTRIB | syscall.IN_CLOSE_WRITE |
		syscall.IN_DELETE_SELF | syscall.IN_MOVE_SELF
	watchDirMask = watchFileMask | syscall.IN_CREATE | syscall.IN_DELETE |
		syscall.IN_MOVED_FROM | syscall.IN_MOVED_TO
)

// newSecretWatch returns a watch, or nil when inotify is unavailable (the
// per-user instance limit reached, a seccomp profile refusing it): the
// stat cache then serves every lookup. The descriptor is closed when the
// watch becomes unreachable, as a reloaded config drops its SecretDir.
func newSecretWatch() *secretWatch {
	fd, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		return nil
	}
	w := &secretWatch{fd: fd, vals: map[string]Secret{}, watched: map[string]bool{}, buf: make([]byte, 4096)}
	runtime.AddCleanup(w, func(fd int) { syscall.Close(fd) }, fd)
	return w
}

// lookup returns path's value and true, or false when the caller must
// use the stat cache because the watch cannot vouch for anything.
func (w *secretWatch) lookup(path, secret, key string) (Secret, error, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.drain() {
		return Secret{}, nil, false
	}
	if v, ok := w.vals[path]; ok {
		return v, nil, true
	}
	// Watch first, resolve and read second: a change in between leaves
	// an event that the next lookup drains. The secrets directory and the
	// key's directory hold every name the kubelet swaps (<secret>, ..data,
	// the key's own symbolic link).
	keyDir := filepath.Dir(path)
	cacheable := w.add(filepath.Dir(keyDir), watchDirMask) && w.add(keyDir, watchDirMask)
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
		return Secret{}, notMounted(secret, key), true
	}
	// Only a file in the key's directory or one below it (plain files, or
	// the kubelet's ..<timestamp>/<key>) is cached: a link that leaves the
	// directory may pass through names no watch covers, so such a key is
	// read on every lookup. Resolving takes several syscalls and may race
	// a swap; it only chooses watches, and the value is read through the
	// path itself, which the kernel resolves in one step.
	realDir, err1 := filepath.EvalSymlinks(keyDir)
	resolved, err2 := filepath.EvalSymlinks(path)
	cacheable = cacheable && err1 == nil && err2 == nil && within(resolved, realDir) &&
		w.add(resolved, watchFileMask) &&
		w.add(filepath.Dir(resolved), watchDirMask)
	v, err := readSecret(path, secret, key)
	if err != nil {
		return Secret{}, err, true
	}
	if cacheable {
		w.vals[path] = v
	}
	return v, nil, true
}

// drain reads every queued event without blocking and empties the cache
// if there was any. It reports false when the descriptor is unusable.
func (w *secretWatch) drain() bool {
	if w.broken {
		return false
	}
	for {
		n, err := syscall.Read(w.fd, w.buf)
		switch {
		case n > 0:
			clear(w.vals)
			clear(w.watched)
			continue
		case errors.Is(err, syscall.EAGAIN):
			return true
		case errors.Is(err, syscall.EINTR):
			continue
		}
		// EOF or an error: nothing can be vouched for any more.
		w.broken = true
		clear(w.vals)
		return false
	}
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && filepath.IsLocal(rel)
}

// add watches path with mask; false when the kernel refused (watch limit).
func (w *secretWatch) add(path string, mask uint32) bool {
	if w.watched[path] {
		return true
	}
	if _, err := syscall.InotifyAddWatch(w.fd, path, mask|syscall.IN_MASK_ADD); err != nil {
		return false
	}
	w.watched[path] = true
	return true
}
