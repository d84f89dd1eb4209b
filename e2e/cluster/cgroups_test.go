//go:build e2e

package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// cgroupHierarchies lists the mounted cgroup hierarchies (each v1
// controller's and the v2 unified one) under /sys/fs/cgroup. The kubelet
// with the cgroupfs driver makes its pods' cgroups in each of them, under
// its cgroupRoot.
func cgroupHierarchies() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID parent major:minor root mountpoint options... - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 0 || sep+1 >= len(fields) || len(fields) < 5 {
			continue
		}
		fstype, mnt := fields[sep+1], fields[4]
		if (fstype == "cgroup" || fstype == "cgroup2") && strings.HasPrefix(mnt, "/sys/fs/cgroup") {
			out = append(out, mnt)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// makeCgroups makes the run's cgroup root in every hierarchy: the kubelet
// refuses a cgroupRoot that does not exist. A new cpuset cgroup has no CPUs
// or memory nodes until given its parent's.
func makeCgroups(name string) error {
	hs := cgroupHierarchies()
	if len(hs) == 0 {
		return errors.New("no cgroup hierarchy is mounted under /sys/fs/cgroup")
	}
	for _, h := range hs {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("making cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			parent, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(dir, f), parent, 0o644); err != nil {
				return fmt.Errorf("setting %s of cgroup %s: %w", f, dir, err)
			}
		}
	}
	return nil
}

// removeCgroups removes the run's cgroup root, and everything the kubelet
// and runc made under it, from every hierarchy. The processes in them are
// gone by now (the PID namespace ended), but the kernel may take a moment
// to release an emptied cgroup.
func removeCgroups(name string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, name)
		var err error
		for range 50 {
			if err = rmdirTree(dir); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// rmdirTree removes a cgroup directory and its children, deepest first. A
// cgroup is removed with rmdir: its control files cannot be unlinked.
func rmdirTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := rmdirTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		return fmt.Errorf("removing cgroup %s (processes still in it: %q): %w", dir, strings.TrimSpace(string(procs)), err)
	}
	return nil
}
