//go:build e2e

package cluster

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"keyhole.dev/keyhole/internal/testpki"
)

// upstreamAddr is where the fake GitHub listens: the node's address, in
// the cluster's network, which the rendered proxy reaches through
// --proxy-resolve; on 443, the port the sidecar pod's NetworkPolicy
// admits, and where Flux's source-controller finds github.com.
const upstreamAddr = nodeIP + ":443"

// gitHTTPBackend is git's smart-HTTP server, from Debian's git package.
const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// upstream stands in for github.com and api.github.com: TLS with a
// certificate for both names from its own CA (which the proxy is given
// with --upstream-ca-configmap), the real git http-backend behind the
// Basic auth GitHub asks git for, and an API that answers only the current
// real token. A 200 through the proxy is therefore proof that the proxy
// injected the credential. It records the Authorization headers it saw,
// and never sends one back.
type upstream struct {
	caPEM  []byte
	srv    *http.Server
	token  atomic.Pointer[string]
	gitCGI *cgi.Handler
	root   string
	requestLog
}

func startUpstream(dir, token string) (*upstream, error) {
	u := &upstream{root: filepath.Join(dir, "git")}
	u.token.Store(&token)
	cert, caPEM, err := serverCert("keyhole-e2e fake GitHub CA", "github.com", "api.github.com")
	if err != nil {
		return nil, err
	}
	u.caPEM = caPEM
	if err := u.initRepo(dir); err != nil {
		return nil, err
	}
	if u.srv, err = serve(upstreamAddr, u, &cert); err != nil {
		return nil, err
	}
	return u, nil
}

// serve serves h on addr, with TLS and cert when cert is not nil, until
// the server is closed.
func serve(addr string, h http.Handler, cert *tls.Certificate) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if cert == nil {
		go srv.Serve(ln)
		return srv, nil
	}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
	go srv.ServeTLS(ln, "", "")
	return srv, nil
}

func (u *upstream) close() { u.srv.Close() }

func (u *upstream) setToken(tok string) { u.token.Store(&tok) }

// requestLog is what a stand-in server has seen: "HOST METHOD PATH" of
// every request.
type requestLog struct {
	mu   sync.Mutex
	seen []string
}

func (l *requestLog) record(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, r.Host+" "+r.Method+" "+r.URL.Path)
}

// requests returns what the server has seen.
func (l *requestLog) requests() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.record(r)
	tok := *u.token.Load()
	switch strings.ToLower(strings.TrimSuffix(r.Host, ":443")) {
	case "api.github.com":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		if r.Header.Get("Authorization") != "Bearer "+tok {
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(map[string]string{"message": "Bad credentials"})
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"full_name": strings.TrimPrefix(r.URL.Path, "/repos/"), "private": true})
	case "github.com":
		user, pass, ok := r.BasicAuth()
		if !ok || user != "x-access-token" || pass != tok {
			w.Header().Set("WWW-Authenticate", `Basic realm="GitHub"`)
			http.Error(w, "Authentication required", http.StatusUnauthorized)
			return
		}
		u.gitCGI.ServeHTTP(w, r)
	default:
		http.Error(w, "unknown host", http.StatusMisdirectedRequest)
	}
}

// initRepo makes the bare repository acme/widgets.git with one commit.
func (u *upstream) initRepo(dir string) error {
	if _, err := os.Stat(gitHTTPBackend); err != nil {
		return fmt.Errorf("%s is missing: run scripts/test-deps.sh (Debian's git): %w", gitHTTPBackend, err)
	}
	home := filepath.Join(dir, "git-home")
	env := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Acme", "GIT_AUTHOR_EMAIL=dev@acme.invalid",
		"GIT_COMMITTER_NAME=Acme", "GIT_COMMITTER_EMAIL=dev@acme.invalid",
	}
	bare := filepath.Join(u.root, "acme", "widgets.git")
	work := filepath.Join(dir, "git-work")
	for _, d := range []string{home, work, u.root} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(work, "README.md"), []byte("widgets\n"), 0o644); err != nil {
		return err
	}
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{u.root, []string{"init", "--quiet", "--bare", "-b", "main", bare}},
		{work, []string{"init", "--quiet", "-b", "main"}},
		{work, []string{"add", "README.md"}},
		{work, []string{"commit", "--quiet", "-m", "Initial commit"}},
		{work, []string{"push", "--quiet", bare, "main"}},
	} {
		cmd := exec.Command("git", step.args...)
		cmd.Dir = step.dir
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %w: %s", strings.Join(step.args, " "), err, out)
		}
	}
	u.gitCGI = &cgi.Handler{
		Path:   gitHTTPBackend,
		Dir:    u.root,
		Stderr: io.Discard,
		Env:    []string{"GIT_PROJECT_ROOT=" + u.root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "HOME=" + home},
	}
	return nil
}

// head is the commit main points at upstream.
func (u *upstream) head() (string, error) {
	cmd := exec.Command("git", "rev-parse", "refs/heads/main")
	cmd.Dir = filepath.Join(u.root, "acme", "widgets.git")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "GIT_CONFIG_NOSYSTEM=1", "HOME=" + u.root}
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

// serverCert is a CA called caName and a serving certificate for names
// signed by it, and the CA's certificate in PEM.
func serverCert(caName string, names ...string) (tls.Certificate, []byte, error) {
	ca, err := testpki.NewCA(caName)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	cert, err := ca.Leaf(names...)
	return cert, ca.CertPEM, err
}
