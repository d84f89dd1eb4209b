//go:build e2e

package e2ekube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Why a server did not become ready. ErrPortTaken, a port another process
// took between the test choosing it and the server binding it, is the one
// a test may retry with new ports.
var (
	ErrExitedEarly = errors.New("exited before it was ready")
	ErrPortTaken   = errors.New("a port it was given was taken")
)

// Proc is a server a test started, its output in a log file.
type Proc struct {
	Name string
	Log  string // the log file's path
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

// Start starts cmd as the server name, its standard output and error
// written to a new file at logPath.
func Start(name, logPath string, cmd *exec.Cmd) (*Proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout = f
	cmd.Stderr = f
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Proc{Name: name, cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Err is the process's exit status, once Exited is closed.
func (p *Proc) Err() error { return p.err }

// Stop sends SIGTERM, and SIGKILL when the process is still running after
// grace, and waits for it to exit.
func (p *Proc) Stop(grace time.Duration) {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// WaitReady polls ready until it holds, the process exits, or timeout.
// The error of a process that exited says why, with the last tailLines
// lines of its log.
func WaitReady(ctx context.Context, p *Proc, timeout time.Duration, tailLines int, ready func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx) {
			return nil
		}
		select {
		case <-p.done:
			log := Tail(p.Log, tailLines)
			if strings.Contains(log, "address already in use") {
				return fmt.Errorf("%s: %w:\n%s", p.Name, ErrPortTaken, log)
			}
			return fmt.Errorf("%s %w (%v); the end of its log:\n%s", p.Name, ErrExitedEarly, p.err, log)
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready within %s; the end of its log:\n%s", p.Name, timeout, Tail(p.Log, tailLines))
		case <-tick.C:
		}
	}
}

// Get returns the status of a GET, or 0 when the request fails.
func Get(ctx context.Context, client *http.Client, url, token string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// Tail returns the last n lines of a log file, for an error message.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
