package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServerEventStreamNotHeld: with response bodies scrubbed, each
// Server-Sent Event reaches the sandbox before the upstream writes the
// next one, whatever the event ends with (the start of the credential, a
// masked credential, CRLF or CR line breaks): the upstream writes one
// event and waits until the sandbox has read all of it. An event held
// back until more of the stream arrives would never arrive.
func TestServerEventStreamNotHeld(t *testing.T) {
	stars := strings.Repeat("*", len(canary))
	events := []struct{ sent, got string }{
		{sent: `data: {"delta":"hello"}` + "\n\n"},
		{sent: "data: " + canary[:8] + "\n\n"},
		{sent: "data: Bearer " + canary[:3] + "\r\n\r\n"},
		{sent: "data: " + canary + "\n\n", got: "data: " + stars + "\n\n"},
		{sent: "event: delta\ndata: a\ndata: " + canary[:len(canary)-1] + "\n\n"},
		{sent: "data: " + canary[:5] + "\r\r"},
		{sent: ": keep-alive\n\n"},
		{sent: `data: {"delta":"` + canary + `"}` + "\n\n", got: `data: {"delta":"` + stars + `"}` + "\n\n"},
	}
	read := make(chan int) // the index of each event the sandbox read whole
	upstream := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for i, ev := range events {
			io.WriteString(w, ev.sent)
			w.(http.Flusher).Flush()
			select {
			case got := <-read:
				if got != i {
					return
				}
			case <-time.After(5 * time.Second):
				return // the test reports which event it waited for
			case <-r.Context().Done():
				return
			}
		}
	})
	h := newHarness(t, withUpstream(t, upstream, "api.github.com"))
	cfg := strings.Replace(testConfig, `"passthrough"`, `"scrubResponseBodies": true, "passthrough"`, 1)
	writeAtomic(t, h.cfgPath, []byte(cfg))
	eventually(t, "the config with scrubResponseBodies", func() bool { return h.srv.state.Load().cfg.ScrubResponseBodies })

	start := time.Now()
	resp, err := h.client().Get("https://api.github.com/repos/acme/widgets/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s, want 200", resp.Status)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the response's header came after %v, once the upstream gave up waiting", d)
	}
	br := bufio.NewReader(resp.Body)
	for i, ev := range events {
		want := ev.got
		if want == "" {
			want = ev.sent
		}
		buf := make([]byte, len(want))
		done := make(chan error, 1)
		go func() {
			_, err := io.ReadFull(br, buf)
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("event %d: %v", i, err)
			}
		case <-time.After(3 * time.Second):
			t.Fatalf("event %d (%q) did not reach the sandbox before the next one was written", i, ev.sent)
		}
		if string(buf) != want {
			t.Fatalf("event %d = %q, want %q", i, buf, want)
		}
		select {
		case read <- i:
		case <-time.After(3 * time.Second):
			t.Fatalf("the upstream stopped waiting before event %d was read", i)
		}
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
		t.Fatalf("after the last event: %q, %v", rest, err)
	}
}
