package proxylog

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestBoundAddrs: the listening line is found among others, only with
// both addresses; before it, the error says so.
func TestBoundAddrs(t *testing.T) {
	const listening = `{"msg":"keyhole-proxy listening","listen":"127.0.0.1:4001","admin":"127.0.0.1:4002"}`
	for log, want := range map[string][2]string{
		`{"msg":"starting"}` + "\nnot json\n" + listening + "\n":             {"127.0.0.1:4001", "127.0.0.1:4002"},
		`{"msg":"keyhole-proxy listening","listen":"127.0.0.1:4001"}` + "\n": {},
		"": {},
	} {
		f := filepath.Join(t.TempDir(), "proxy.log")
		if err := os.WriteFile(f, []byte(log), 0o600); err != nil {
			t.Fatal(err)
		}
		listen, admin, err := BoundAddrs(f)
		var wantErr error
		if want == [2]string{} {
			wantErr = ErrNotListening
		}
		if listen != want[0] || admin != want[1] || !errors.Is(err, wantErr) {
			t.Errorf("log %q: BoundAddrs = %q, %q, %v; want %q, %q, %v", log, listen, admin, err, want[0], want[1], wantErr)
		}
	}
	if _, _, err := BoundAddrs(filepath.Join(t.TempDir(), "missing.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing log: %v", err)
	}
}

// TestBuffer: writers on several goroutines lose nothing, and String
// reads while they write.
func TestBuffer(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if _, err := b.Write([]byte("line\n")); err != nil {
					t.Error(err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got := strings.Count(b.String(), "line\n"); got != 800 {
		t.Errorf("%d lines, want 800", got)
	}
}

// TestReady: nil once /readyz answers 200; its status otherwise, and the
// dial's error when nothing listens.
func TestReady(t *testing.T) {
	status := http.StatusServiceUnavailable
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	admin := strings.TrimPrefix(srv.URL, "http://")
	if err := Ready(srv.Client(), admin); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("not ready yet: %v, want the 503", err)
	}
	status = http.StatusOK
	if err := Ready(srv.Client(), admin); err != nil {
		t.Errorf("ready: %v", err)
	}
	srv.Close()
	if err := Ready(srv.Client(), admin); err == nil {
		t.Error("nothing listening: no error")
	}
}
