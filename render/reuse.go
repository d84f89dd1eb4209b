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
// options, renders to the same files; anything else is rendered. A render
// of the same directory under way (the other side of a diff, rendered at
// the same time) is waited for. Set it in Options.Reuse; it is safe for
// concurrent use. The files it gives
// share their bytes with the render that made them: neither may modify
// them.
type Reuse struct {
	mu   sync.Mutex
	byID map[string]*reused
	hits int
}

// reused is a sandbox's render; until done is closed it is under way,
// and nothing else of it may be read. ok is false when it failed.
type reused struct {
	done  chan struct{}
	ok    bool
	sb    compiler.Sandbox
	opts  Options
	files []File
}

// NewReuse returns an empty Reuse.
func NewReuse() *Reuse { return &Reuse{byID: map[string]*reused{}} }

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
	opts.Reuse, opts.Put = nil, nil // not inputs of the files
	this := &reused{done: make(chan struct{}), sb: sb, opts: opts}
	// Looking up and claiming the directory is one step: two sides
	// rendering the same sandbox at once must find each other, the later
	// one waiting for the earlier rather than both rendering.
	r.mu.Lock()
	prev := r.byID[dir]
	if prev == nil {
		r.byID[dir] = this
	}
	r.mu.Unlock()
	if prev != nil {
		if <-prev.done; prev.ok && reflect.DeepEqual(prev.sb, sb) && reflect.DeepEqual(prev.opts, opts) {
			r.mu.Lock()
			r.hits++
			r.mu.Unlock()
			return prev.files, nil
		}
		r.mu.Lock()
		r.byID[dir] = this
		r.mu.Unlock()
	}
	defer close(this.done)
	files, err := fresh()
	if err != nil {
		return nil, err
	}
	this.ok, this.files = true, files
	return files, nil
}
