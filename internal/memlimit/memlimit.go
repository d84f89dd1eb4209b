// Package memlimit gives the Go runtime a soft memory limit
// (runtime/debug.SetMemoryLimit): the memory limit of the cgroup the
// process runs in (Apply), and for a run that reads inputs, one sized to
// them (ForInput).
//
// The runtime sizes its heap from what is live, twice that by default
// (GOGC=100), and knows nothing of a container's limit: a CI job or a pod
// whose peak passes the limit is killed, even though the collector could
// have kept it under by working harder. With the soft limit set, it does
// work harder as the heap nears the limit, and only there. The Go runtime
// reads the cgroup's CPU limit for GOMAXPROCS, but not its memory limit.
//
// GOMEMLIMIT in the environment, when set, is left to the runtime.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"
)

// Ratio is the share of the cgroup's limit given to the runtime: the rest
// is for what the runtime does not count (the binary's own pages, the
// kernel's page cache of the files read).
const Ratio = 0.9

// Decision is what Apply found and did.
type Decision struct {
	// Cgroup is the smallest memory limit of the process's cgroup and its
	// ancestors, in bytes; 0 when there is none.
	Cgroup int64
	// Limit is the soft limit set, in bytes; 0 when none was set.
	Limit int64
	// Why says, when no limit was set, why not.
	Why string
	// Input is the size in bytes of the input the limit was set for
	// (ForInput); 0 when it was not.
	Input int64
}

// Apply sets the runtime's soft memory limit to Ratio of the cgroup's
// limit, unless getenv("GOMEMLIMIT") is set or no limit is found. It reads
// the cgroup files under the root file system.
func Apply(getenv func(string) string) Decision {
	return apply(getenv, os.DirFS("/"), debug.SetMemoryLimit)
}

func apply(getenv func(string) string, root fs.FS, set func(int64) int64) Decision {
	if getenv("GOMEMLIMIT") != "" {
		return Decision{Why: "GOMEMLIMIT is set"}
	}
	limit, err := FromCgroup(root)
	switch {
	case err != nil:
		return Decision{Why: err.Error()}
	case limit == 0:
		return Decision{Why: "the cgroup sets no memory limit"}
	}
	d := Decision{Cgroup: limit, Limit: int64(float64(limit) * Ratio)}
	set(d.Limit)
	return d
}

// FromCgroup returns the smallest memory limit of the process's cgroup and
// of its ancestors up to the root the process sees, read under root (the
// file system's "/"): memory.max and memory.high in cgroup v2,
// memory.limit_in_bytes in v1 (what a hybrid system's memory controller
// uses). It returns 0 when none is set, and an error only when the files
// that say where the cgroup is cannot be read or make no sense; a system
// without cgroups has no limit.
func FromCgroup(root fs.FS) (int64, error) {
	cg, err := fs.ReadFile(root, "proc/self/cgroup")
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading the process's cgroup: %w", err)
	}
	mi, err := fs.ReadFile(root, "proc/self/mountinfo")
	if err != nil {
		return 0, fmt.Errorf("reading the process's mounts: %w", err)
	}
	v1, v2 := cgroupPaths(cg)
	mounts := parseMountinfo(mi)
	// A hybrid system mounts both; the memory controller is where the
	// v1 hierarchy has it, and the unified one then has no memory files.
	if v1 != "" {
		if m, ok := findMount(mounts, func(m mount) bool { return m.fstype == "cgroup" && hasOption(m.superOptions, "memory") }); ok {
			return smallest(root, m, v1, []string{"memory.limit_in_bytes"})
		}
	}
	if v2 != "" {
		if m, ok := findMount(mounts, func(m mount) bool { return m.fstype == "cgroup2" }); ok {
			return smallest(root, m, v2, []string{"memory.max", "memory.high"})
		}
	}
	return 0, nil
}

// cgroupPaths returns the process's cgroup in the v1 memory hierarchy and
// in the v2 unified one, from /proc/self/cgroup ("ID:controllers:path").
func cgroupPaths(b []byte) (v1, v2 string) {
	for line := range strings.Lines(string(b)) {
		id, rest, ok := strings.Cut(strings.TrimRight(line, "\n"), ":")
		if !ok {
			continue
		}
		controllers, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		switch {
		case id == "0" && controllers == "":
			v2 = p
		case hasOption(controllers, "memory"):
			v1 = p
		}
	}
	return v1, v2
}

// mount is one line of /proc/self/mountinfo: the directory of its file
// system it shows (root), where (point), and what file system.
type mount struct {
	root, point, fstype, superOptions string
}

func parseMountinfo(b []byte) []mount {
	var out []mount
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		// ID parent major:minor root point options [optional...] - fstype source superoptions
		left, right, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		lf, rf := strings.Fields(left), strings.Fields(right)
		if len(lf) < 5 || len(rf) < 3 {
			continue
		}
		out = append(out, mount{root: unescape(lf[3]), point: unescape(lf[4]), fstype: rf[0], superOptions: rf[2]})
	}
	return out
}

func findMount(ms []mount, match func(mount) bool) (mount, bool) {
	for _, m := range ms {
		if match(m) {
			return m, true
		}
	}
	return mount{}, false
}

// unescape undoes mountinfo's octal escapes of space, tab, newline and
// backslash ("\040").
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func hasOption(list, opt string) bool {
	for o := range strings.SplitSeq(list, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// smallest reads the limit files in the directory of cgroup p under mount
// m and in each of its parents up to the mount's own directory, and
// returns the smallest limit found, 0 for none.
func smallest(root fs.FS, m mount, p string, files []string) (int64, error) {
	base := strings.TrimPrefix(path.Clean(m.point), "/")
	var least int64
	for dir := inMount(m, p); ; dir = path.Dir(dir) {
		for _, f := range files {
			b, err := fs.ReadFile(root, path.Join(base, dir, f))
			if err != nil {
				continue // the root cgroup has no limit files; nor may a parent the namespace hides
			}
			n, ok := parseLimit(b)
			if ok && n > 0 && (least == 0 || n < least) {
				least = n
			}
		}
		if dir == "/" {
			return least, nil
		}
	}
}

// inMount is where cgroup p is under mount m, as a path from the mount's
// own directory ("/" for that directory itself).
func inMount(m mount, p string) string {
	rel := path.Clean(p)
	if m.root != "/" {
		// The mount shows the hierarchy from m.root down; a cgroup
		// outside it (a namespace's ".." path) is read from the mount's
		// own directory, the nearest the process can see.
		r, ok := strings.CutPrefix(rel, path.Clean(m.root))
		if !ok || (r != "" && r[0] != '/') {
			r = "/"
		}
		rel = r
	}
	if strings.HasPrefix(rel, "/..") || !strings.HasPrefix(rel, "/") {
		return "/"
	}
	return rel
}

// parseLimit reads a limit file: a number of bytes, or "max" (v2) and
// numbers near the largest (v1's "unlimited" is 2^63 rounded down to a
// page) for none.
func parseLimit(b []byte) (int64, bool) {
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	if n >= math.MaxInt64/2 {
		return 0, true
	}
	return n, true
}
