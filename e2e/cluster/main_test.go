//go:build e2e

package cluster

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"testing"
)

// Environment variables the test binary passes to itself inside the
// namespaces. Nothing else sets them.
const (
	envInner  = "KEYHOLE_E2E_CLUSTER_INNER" // the run's state directory
	envCgroup = "KEYHOLE_E2E_CLUSTER_CGROUP"
	envTools  = "KEYHOLE_E2E_CLUSTER_TOOLS" // tools.env: what the outer run located
	// envPrefix starts each of them; the servers and kubectl inherit
	// none.
	envPrefix = "KEYHOLE_E2E_CLUSTER_"
)

// runPrefix names everything machine-wide a run makes: its state
// directory under the temp dir and its cgroup root. The outer process's
// PID follows it, so a later run can tell a live run's leftovers from a
// dead one's.
const runPrefix = "keyhole-e2e-cluster-"

// the is the cluster every test in the package uses; set once in the
// inner TestMain before m.Run.
var the *cluster

func TestMain(m *testing.M) {
	flag.Parse()
	if dir := os.Getenv(envInner); dir != "" {
		os.Exit(innerMain(m, dir))
	}
	os.Exit(outerMain())
}

// outerMain runs in the machine's namespaces. It builds or finds what the
// cluster needs, makes the run's cgroup root and state directory, runs
// this same test binary inside new network, mount and PID namespaces, and
// removes the cgroups and the directory afterwards, whatever happened
// inside.
func outerMain() int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e/cluster: must run as root (it starts containerd and a kubelet); run `make e2e-cluster` as root")
		return 1
	}
	sweep(os.Stderr)
	tools, err := locateTools()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/cluster: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", runPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/cluster: %v\n", err)
		return 1
	}
	cgroup := runPrefix + strconv.Itoa(os.Getpid())
	defer func() {
		if err := removeCgroups(cgroup); err != nil {
			fmt.Fprintf(os.Stderr, "e2e/cluster: %v\n", err)
		}
		os.RemoveAll(dir)
	}()
	if err := makeCgroups(cgroup); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/cluster: %v\n", err)
		return 1
	}
	toolsFile := filepath.Join(dir, "tools.env")
	if err := os.WriteFile(toolsFile, tools.encode(), 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/cluster: %v\n", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/cluster: %v\n", err)
		return 1
	}
	// --kill-child: unshare kills the namespaces' init when it dies, and
	// the kernel kills every process in a PID namespace when its init
	// exits; /bin/sh is that init, so orphaned container shims are reaped.
	args := append([]string{
		"--net", "--mount", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private",
		"--", "/bin/sh", "-c", `"$@"`, "sh", self,
	}, os.Args[1:]...)
	cmd := exec.Command("unshare", args...)
	cmd.Stdin = nil
	cmd.Stdout = os.Stdout
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), envInner+"="+dir, envCgroup+"="+cgroup, envTools+"="+toolsFile)
	// Its own process group, so a ^C reaches only this process, which then
	// ends the namespaces and cleans up; and killed with this process if a
	// test timeout kills it first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/cluster: starting unshare (util-linux): %v\n", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	// Stop a minute before go test's own -timeout would kill this process
	// without cleaning up.
	var deadline <-chan time.Time
	if f := flag.Lookup("test.timeout"); f != nil {
		if d, err := time.ParseDuration(f.Value.String()); err == nil && d > 2*time.Minute {
			deadline = time.After(d - time.Minute)
		}
	}
	select {
	case err := <-done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "e2e/cluster: %v\n", err)
			return 1
		}
		return 0
	case s := <-sigs:
		fmt.Fprintf(os.Stderr, "e2e/cluster: %v: stopping the cluster\n", s)
	case <-deadline:
		fmt.Fprintln(os.Stderr, "e2e/cluster: the test is about to time out: stopping the cluster")
	}
	cmd.Process.Kill()
	<-done
	return 1
}

// sweep removes what a run that was killed before it could clean up left
// behind: state directories and cgroup roots named for a process that no
// longer exists.
func sweep(w *os.File) {
	dead := func(name string) bool {
		rest, ok := strings.CutPrefix(name, runPrefix)
		if !ok {
			return false
		}
		pid, err := strconv.Atoi(strings.SplitN(rest, "-", 2)[0])
		if err != nil || pid == os.Getpid() {
			return false
		}
		return syscall.Kill(pid, 0) == syscall.ESRCH
	}
	dirs, _ := os.ReadDir(os.TempDir())
	for _, d := range dirs {
		if d.IsDir() && dead(d.Name()) {
			fmt.Fprintf(w, "e2e/cluster: removing %s, left by a run that was killed\n", d.Name())
			os.RemoveAll(filepath.Join(os.TempDir(), d.Name()))
		}
	}
	for _, h := range cgroupHierarchies() {
		entries, _ := os.ReadDir(h)
		for _, e := range entries {
			if e.IsDir() && dead(e.Name()) {
				fmt.Fprintf(w, "e2e/cluster: removing cgroup %s/%s, left by a run that was killed\n", h, e.Name())
				if err := rmdirTree(filepath.Join(h, e.Name())); err != nil {
					fmt.Fprintf(w, "e2e/cluster: %v\n", err)
				}
			}
		}
	}
}
