//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// authServer stands in for an OAuth 2.0 authorization server and the API
// its tokens open, on loopback: the token endpoint checks the client's
// credentials and hands out tokens that live lifetime; the API accepts a
// token only while it lives and until revoked, answering 401 otherwise,
// and echoes the Authorization header it got, as a hostile upstream
// could.
type authServer struct {
	t        testing.TB
	w        *world
	secret   string
	lifetime time.Duration

	mu        sync.Mutex
	live      map[string]time.Time
	exchanges int
	refused   int // 401s the API answered
	served    int // requests the API answered 200
}

func (a *authServer) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Host == "auth.acme.example" {
		form, _ := url.ParseQuery(string(body))
		id, sec, ok := r.BasicAuth()
		if !ok {
			id, sec = form.Get("client_id"), form.Get("client_secret")
		}
		if id != "keyhole-e2e" || sec != a.secret || form.Get("grant_type") != "client_credentials" || form.Get("scope") != "orders:read orders:write" {
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(rw, `{"error":"invalid_client","error_description":"got %s"}`, sec)
			return
		}
		a.mu.Lock()
		a.exchanges++
		tok := fmt.Sprintf("%s_%d", canary(a.t), a.exchanges)
		a.live[tok] = time.Now().Add(a.lifetime)
		a.mu.Unlock()
		a.w.setToken(a.t, tok)
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": int(a.lifetime / time.Second)})
		return
	}
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	a.mu.Lock()
	exp, ok := a.live[tok]
	ok = ok && time.Now().Before(exp)
	if ok {
		a.served++
	} else {
		a.refused++
	}
	a.mu.Unlock()
	rw.Header().Set("X-Echo", r.Header.Get("Authorization"))
	if !ok {
		rw.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(rw, "not live: %s\n", r.Header.Get("Authorization"))
		return
	}
	fmt.Fprintf(rw, `{"you_sent": %q, "bytes": %d}`+"\n", r.Header.Get("Authorization"), len(body))
}

// revoke makes the API refuse every token handed out so far, as a server
// does after a key rotation.
func (a *authServer) revoke() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.live)
}

// TestOAuth2UnderLoad runs the proxy binary with an oauth2 injection
// whose tokens live two seconds, and for 30 s (or KEYHOLE_OAUTH_LOAD, a
// Go duration, for a longer run) sends requests through it
// with real clients, curl and Python requests (GETs, and POSTs with a
// body), while the server also revokes every token every five seconds:
// the proxy renews tokens before they expire and, after a revocation,
// on the API's 401, so no 401 reaches a client; no output holds the
// client's secret or a token.
func TestOAuth2UnderLoad(t *testing.T) {
	python := pythonWithRequests(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	w := newWorld(t, "oauth2.json", "--resolve", "auth.acme.example:443:"+addr, "--resolve", "api.acme.example:443:"+addr)
	a := &authServer{t: t, w: w, secret: "cs_" + canary(t), lifetime: 2 * time.Second, live: map[string]time.Time{}}
	serveUpstream(t, ln, w.upstreamCA, []string{"auth.acme.example", "api.acme.example"}, a)
	newSecretVolume(t, w.secretsDir, "acme-client", map[string]string{"client-id": "keyhole-e2e", "client-secret": a.secret})
	w.plantSecret(a.secret)

	run := 30 * time.Second
	if d := os.Getenv("KEYHOLE_OAUTH_LOAD"); d != "" {
		var err error
		if run, err = time.ParseDuration(d); err != nil || run < time.Second {
			t.Fatalf("KEYHOLE_OAUTH_LOAD=%q: want a Go duration of a second or more", d)
		}
	}
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				a.revoke()
			}
		}
	}()
	var curls, curlBad atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		deadline := time.Now().Add(run)
		for i := 0; time.Now().Before(deadline); i++ {
			var got curlResult
			if i%2 == 0 {
				got = w.curl(t, "https://api.acme.example/v1/orders", "-H", "Authorization: Bearer omnia-injected-acme-api")
			} else {
				got = w.curl(t, "https://api.acme.example/v1/orders", "-H", "Authorization: Bearer omnia-injected-acme-api", "-H", "Content-Type: application/json", "--data", `{"item":"widget"}`)
			}
			curls.Add(1)
			if got.code != http.StatusOK {
				curlBad.Add(1)
				t.Errorf("curl request %d: %d %s", i, got.code, got.stderr)
			}
		}
	})
	script := fmt.Sprintf(`
import json, threading, time, requests
deadline = time.time() + %d
h = {"Authorization": "Bearer omnia-injected-acme-api"}
counts = {}
lock = threading.Lock()
def work(n):
    s = requests.Session()
    i = 0
    while time.time() < deadline:
        if (i + n) %% 2:
            r = s.post("https://api.acme.example/v1/orders", headers=h, json={"item": "gadget", "n": i}, timeout=20)
        else:
            r = s.get("https://api.acme.example/v1/orders", headers=h, timeout=20)
        with lock:
            counts[r.status_code] = counts.get(r.status_code, 0) + 1
        i += 1
threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
for th in threads: th.start()
for th in threads: th.join()
print(json.dumps({str(k): v for k, v in counts.items()}))
`, int(run/time.Second))
	res := w.runClientWithin(t, run+time.Minute, t.TempDir(), w.sandboxEnv(t), python, "-c", script)
	wg.Wait()
	close(stop)
	if res.err != nil {
		t.Fatalf("python: %v\n%s", res.err, res.stderr)
	}
	var counts map[string]int
	if err := json.Unmarshal([]byte(res.stdout), &counts); err != nil {
		t.Fatalf("python printed %q: %v", res.stdout, err)
	}
	a.mu.Lock()
	exchanges, refused, served := a.exchanges, a.refused, a.served
	a.mu.Unlock()
	t.Logf("python: %v; curl: %d requests, %d not 200; the token endpoint: %d exchanges; the API: %d served, %d refused (401) and retried by the proxy",
		counts, curls.Load(), curlBad.Load(), exchanges, served, refused)
	for code, n := range counts {
		if code != "200" {
			t.Errorf("python got %d answers %s", n, code)
		}
	}
	if counts["200"] == 0 || curls.Load() == 0 {
		t.Fatalf("no request went through")
	}
	// Two-second tokens renewed at half their life, plus a renewal per
	// revocation: about one exchange a second (30 over 30 s), not one per
	// request.
	if secs := int(run / time.Second); exchanges < secs/3 || exchanges > 4*secs {
		t.Errorf("%d exchanges over %s, want one per second or so", exchanges, run)
	}
	if refused == 0 {
		t.Errorf("the API refused no token: the revocations did not exercise the renewal on 401")
	}
}
