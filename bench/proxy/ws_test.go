package main

import (
	"strings"
	"testing"

	"keyhole.dev/keyhole/internal/testpki"
)

// wsEnv is an env with only the CA and the WebSocket echo upstream.
func wsEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	ca, err := testpki.NewFileCA(dir, "upstream-ca")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{dir: dir, upstreamCA: ca}
	if err := e.startWSUpstream(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.ws.srv.Close() })
	return e
}

func TestWSRoundTripsDirect(t *testing.T) {
	e := wsEnv(t)
	rate, samples, err := e.wsRoundTrips(route{name: nameDirect, roots: e.upstreamCA.Pool(), auth: "Bearer " + token}, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 50 {
		t.Errorf("%d samples, want one per round trip: 50", len(samples))
	}
	for i, s := range samples {
		if s <= 0 {
			t.Errorf("sample %d is %v, want a positive duration", i, s)
		}
	}
	if rate <= 0 {
		t.Errorf("rate %v, want positive", rate)
	}
	if n := e.ws.refused.Load(); n != 0 {
		t.Errorf("upstream refused %d handshakes with the token", n)
	}
}

// A handshake without the real token is refused and counted, so a
// contender that does not inject shows in the report.
func TestWSUpstreamRefusesWithoutToken(t *testing.T) {
	e := wsEnv(t)
	_, _, err := e.wsRoundTrips(route{name: nameDirect, roots: e.upstreamCA.Pool(), auth: "Bearer omnia-injected-bench"}, 5)
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("err = %v, want the upstream's 401", err)
	}
	if n := e.ws.refused.Load(); n != 1 {
		t.Errorf("refused = %d, want 1", n)
	}
}

func TestWSMessage(t *testing.T) {
	m := wsMessage()
	if len(m) != wsMessageSize {
		t.Errorf("message of %d bytes, want %d", len(m), wsMessageSize)
	}
	if !strings.HasPrefix(string(m), `{"type":"ping","pad":"x`) || !strings.HasSuffix(string(m), `x"}`) {
		t.Errorf("message %.40q... is not the JSON-ish text expected", m)
	}
	if strings.Contains(string(m), token) {
		t.Error("the message holds the credential: the scrub would change the echo")
	}
}
