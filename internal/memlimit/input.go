package memlimit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
)

// What a check holds grows with what it reads: at the peak, about three
// times the bytes of its files (3.0 times on the repositories bench/gen
// writes, whose Connections are the densest input keyhole keeps). Left to
// GOGC=100, the heap then grows to twice that before a collection, six
// times the input. The soft limit ForInput sets is InputBase plus
// PerInputByte times the input's size: a little above what a check of
// the densest input holds, far below what the collector would let the
// heap grow to (docs/benchmarks.md, "The memory budget").
const (
	// InputBase is what the runtime holds whatever the input: package
	// initialisation's heap, the schemas, the goroutines' stacks.
	InputBase = 24 << 20
	// PerInputByte is the limit's growth per byte of input.
	PerInputByte = 3.25
	// maxInputWalk bounds the files InputSize looks at: past it, an
	// input is large enough that no limit is set from its size.
	maxInputWalk = 1 << 20
)

// ForInput sets the runtime's soft memory limit for a run that reads the
// inputs at paths: InputBase plus PerInputByte times the size of their
// files (InputSize), unless getenv("GOMEMLIMIT") is set or
// the limit Apply set, d, is already lower. A run whose input cannot be
// sized (standard input, a path that cannot be read, too many files)
// keeps d. Where what is live passes the limit, the collector runs at
// most half the time: the run is slower, never stopped.
func ForInput(d Decision, paths []string, getenv func(string) string) Decision {
	return forInput(d, paths, getenv, debug.SetMemoryLimit)
}

func forInput(d Decision, paths []string, getenv func(string) string, set func(int64) int64) Decision {
	if getenv("GOMEMLIMIT") != "" {
		return d
	}
	size, ok := InputSize(paths)
	if !ok {
		return d
	}
	limit := InputBase + int64(float64(size)*PerInputByte)
	if d.Limit > 0 && d.Limit <= limit {
		return d
	}
	set(limit)
	return Decision{Cgroup: d.Cgroup, Limit: limit, Input: size}
}

// InputSize returns the bytes of the regular files at paths and under
// them, .git directories aside, following symbolic links as the loader
// does (a link named or to a file, not one to a directory inside a walk).
// It returns false where the files' size does not tell what a check
// holds: a path is standard input ("-") or cannot be read, the walk finds
// more than maxInputWalk files, or it finds a kustomization or a Helm
// chart, whose builds hold what they make (check of examples/
// kustomize-overlay took twice the CPU under a limit sized to its files).
// No paths is the working directory, as for check.
func InputSize(paths []string) (int64, bool) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var size, files int64
	for _, p := range paths {
		if p == "-" {
			return 0, false
		}
		root, err := filepath.EvalSymlinks(p)
		if err != nil {
			return 0, false
		}
		err = filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case d.IsDir() && d.Name() == ".git":
				return filepath.SkipDir
			case d.IsDir():
				return nil
			}
			if files++; files > maxInputWalk {
				return errNotSized
			}
			switch d.Name() {
			case "kustomization.yaml", "kustomization.yml", "Kustomization", "Chart.yaml":
				return errNotSized
			}
			fi, err := os.Stat(name) // through a link to a file
			if err != nil || !fi.Mode().IsRegular() {
				return nil // a broken link, a link to a directory, a device
			}
			size += fi.Size()
			return nil
		})
		if err != nil {
			return 0, false
		}
	}
	return size, true
}

// errNotSized stops a walk whose input its files' size does not measure.
var errNotSized = errors.New("not sized by its files")
