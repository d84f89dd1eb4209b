// Package proxylog holds what the tests and benchmarks that run a
// keyhole-proxy, in process or as a child, need of its JSON log: a
// buffer to collect it while they read it, and the addresses it bound.
// They start it on port 0, so that nothing can take a port between
// choosing and binding it, learn the ports from its listening line, and
// then ask its admin listener whether it is ready.
package proxylog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
)

// Buffer collects a log (a server's goroutines', a child process's
// output) while a test reads it: an io.Writer safe for concurrent
// writers and readers. Its zero value is empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// ErrNotListening is Bound's error while the log has no listening line
// yet.
var ErrNotListening = errors.New("not listening yet")

// Bound reads the proxy's "keyhole-proxy listening" line from its log:
// the forward-proxy address and the admin address it bound.
func Bound(log string) (listen, admin string, err error) {
	for _, line := range strings.Split(log, "\n") {
		var l struct {
			Msg    string `json:"msg"`
			Listen string `json:"listen"`
			Admin  string `json:"admin"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "keyhole-proxy listening" && l.Listen != "" && l.Admin != "" {
			return l.Listen, l.Admin, nil
		}
	}
	return "", "", ErrNotListening
}

// BoundAddrs is Bound of the log file logFile.
func BoundAddrs(logFile string) (listen, admin string, err error) {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return "", "", err
	}
	return Bound(string(data))
}

// Ready asks the proxy's admin listener at admin (host:port, as Bound
// reads it) whether the proxy is ready to serve: nil when /readyz
// answers 200.
func Ready(client *http.Client, admin string) error {
	resp, err := client.Get("http://" + admin + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}
