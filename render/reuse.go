package render

import (
	"reflect"
	"sync"

	"keyhole.dev/keyhole/compiler"
)

// Reuse remembers the files each sandbox rendered to, so that a second
// render of mostly the same plan (the other side of a diff) takes them
// instead of rendering again. A sandbox's files depend on the sandbox, its
// directory and the options alone (see renderAll), so a sandbox equal to
// one rendered before, field by field, in the same directory with the same
// options, renders to the same files; anything else is rendered. Set it
// in Options.Reuse; it is safe for concurrent use. The files it gives
// share their bytes with the render that made them: neither may modify
// them.
type Reuse struct {
	mu   sync.Mutex
	byID map[string]reused
	hits int
}

type reused struct {
	sb    compiler.Sandbox
	opts  Options
	files []File
}

// NewReuse returns an empty Reuse.
func NewReuse() *Reuse { return &Reuse{byID: map[string]reused{}} }

// Hits is how many sandboxes' files were reused rather than rendered.
func (r *Reuse) Hits() int {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hits
}

// render is fresh(), the render of sb into dir with opts, or an earlier
// result when it has one for an equal sandbox, directory and options.
func (r *Reuse) render(sb compiler.Sandbox, dir string, opts Options, fresh func() ([]File, error)) ([]File, error) {
	if r == nil {
		return fresh()
	}
	opts.Reuse = nil // not an input of the files
	r.mu.Lock()
	prev, ok := r.byID[dir]
	r.mu.Unlock()
	if ok && reflect.DeepEqual(prev.sb, sb) && reflect.DeepEqual(prev.opts, opts) {
		r.mu.Lock()
		r.hits++
		r.mu.Unlock()
		return prev.files, nil
	}
	files, err := fresh()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.byID[dir] = reused{sb: sb, opts: opts, files: files}
	r.mu.Unlock()
	return files, nil
}
