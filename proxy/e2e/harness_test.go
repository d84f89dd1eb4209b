//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/proxylog"
	"keyhole.dev/keyhole/internal/testpki"
)

// proxyBin is the keyhole-proxy binary TestMain builds once for every test
// in this package; it is written only before m.Run.
var proxyBin string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "keyhole-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	goTool, err := exec.LookPath("go")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: the go tool is not on PATH:", err)
		return 1
	}
	proxyBin = filepath.Join(dir, "keyhole-proxy")
	build := exec.Command(goTool, "build", "-o", proxyBin, "keyhole.dev/keyhole/cmd/keyhole-proxy")
	build.Stdout = os.Stderr
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: building cmd/keyhole-proxy:", err)
		return 1
	}
	return m.Run()
}

// aptPackage names the Debian package that provides a tool the tests run,
// so that a missing tool fails with the install command that fixes it.
func aptPackage(tool string) string {
	switch tool {
	case "python3":
		return "python3 python3-requests"
	case "node":
		return "nodejs"
	case "php":
		return "php-cli php-curl"
	case "java":
		return "default-jre-headless"
	case "iptables-restore", "ip6tables-restore":
		return "iptables"
	case "ip":
		return "iproute2"
	case "setpriv":
		return "util-linux"
	case "go":
		return "golang (or the Go toolchain the module names)"
	default: // curl, git, gh, wget and bash are packaged under their own names
		return tool
	}
}

// requireTool returns the absolute path of a tool, failing the test (never
// skipping it) with the Debian package to install when it is missing.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run apt-get install -y %s", name, aptPackage(name))
	}
	return p
}

// gitHTTPBackend is where Debian's git package installs the smart-HTTP CGI.
const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// testCA is a throwaway certificate authority written to PEM files, as
// cert-manager writes tls.crt and tls.key.
type testCA struct{ *testpki.FileCA }

// newCA makes a CA of common name name and writes it to
// <dir>/<name>.crt and <dir>/<name>.key, making dir.
func newCA(t testing.TB, dir, name string) *testCA {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c, err := testpki.NewFileCA(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{c}
}

// leaf issues a server certificate for names, signed by the CA.
func (ca *testCA) leaf(t testing.TB, names ...string) tls.Certificate {
	t.Helper()
	leaf, err := ca.Leaf(names...)
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// recorded is what an upstream saw of one request.
type recorded struct {
	Method string
	URI    string
	Host   string
	Header http.Header
}

// upstream is a local TLS server standing in for a real host, reached by
// the proxy through --resolve. It records every request it is sent.
type upstream struct {
	addr string
	mu   sync.Mutex
	seen []recorded
}

// recording is h, each request recorded in u first.
func (u *upstream) recording(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, recorded{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header.Clone()})
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func startUpstream(t testing.TB, ca *testCA, names []string, h http.Handler) *upstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveUpstream(t, ln, ca, names, h)
}

// serveUpstream is startUpstream on a listener the caller made.
func serveUpstream(t testing.TB, ln net.Listener, ca *testCA, names []string, h http.Handler) *upstream {
	t.Helper()
	u := &upstream{addr: ln.Addr().String()}
	srv := &http.Server{
		Handler: u.recording(h),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{ca.leaf(t, names...)},
			NextProtos:   []string{"http/1.1"},
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return u
}

// requests returns a copy of what the upstream has seen so far.
func (u *upstream) requests() []recorded {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]recorded(nil), u.seen...)
}

// find returns the requests whose URI starts with prefix and whose method
// is method ("" matches any).
func (u *upstream) find(method, prefix string) []recorded {
	var out []recorded
	for _, r := range u.requests() {
		if (method == "" || r.Method == method) && strings.HasPrefix(r.URI, prefix) {
			out = append(out, r)
		}
	}
	return out
}

// secretVolume lays out one Secret the way the kubelet's atomic writer
// does: the values live in a timestamped directory, ..data points at it,
// and each key is a symlink through ..data. Updates swap ..data with one
// rename, so a reader sees the old or the new set, never a mix.
type secretVolume struct {
	dir  string
	gen  int
	keys map[string]bool
}

func newSecretVolume(t testing.TB, secretsDir, name string, data map[string]string) *secretVolume {
	t.Helper()
	v := &secretVolume{dir: filepath.Join(secretsDir, name), keys: map[string]bool{}}
	if err := os.MkdirAll(v.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	v.update(t, data)
	return v
}

func (v *secretVolume) update(t testing.TB, data map[string]string) {
	t.Helper()
	v.gen++
	ts := fmt.Sprintf("..2026_01_01_00_00_%02d.%d", v.gen, v.gen)
	for k, val := range data {
		writeFile(t, filepath.Join(v.dir, ts, k), []byte(val))
	}
	if err := os.MkdirAll(filepath.Join(v.dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	old, _ := os.Readlink(filepath.Join(v.dir, "..data"))
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k := range data {
		if !v.keys[k] {
			if err := os.Symlink(filepath.Join("..data", k), filepath.Join(v.dir, k)); err != nil {
				t.Fatal(err)
			}
			v.keys[k] = true
		}
	}
	for k := range v.keys {
		if _, ok := data[k]; !ok {
			if err := os.Remove(filepath.Join(v.dir, k)); err != nil {
				t.Fatal(err)
			}
			delete(v.keys, k)
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

// age sets the current values' modification times an hour back, as a
// long-running proxy sees files mounted long ago, so a proxy that caches
// settled files does cache them.
func (v *secretVolume) age(t testing.TB) {
	t.Helper()
	old := time.Now().Add(-time.Hour)
	for k := range v.keys {
		if err := os.Chtimes(filepath.Join(v.dir, k), old, old); err != nil {
			t.Fatal(err)
		}
	}
}

// proxyProc is a running keyhole-proxy subprocess.
type proxyProc struct {
	cmd    *exec.Cmd
	addr   string // the forward-proxy listener, host:port
	admin  string // the admin listener, host:port
	stdout *proxylog.Buffer
	stderr *proxylog.Buffer
	exited chan struct{}
}

// url is the proxy URL clients put in HTTPS_PROXY.
func (p *proxyProc) url() string { return "http://" + p.addr }

// stop asks the proxy to drain and exit, then kills it if it does not.
func (p *proxyProc) stop() {
	if p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// world is one sandbox's surroundings: the sandbox CA and its bundle, an
// upstream CA, fake api.github.com and github.com servers, the mounted
// Secret holding a unique canary token, and the proxy between them.
type world struct {
	dir        string
	sandboxCA  *testCA
	upstreamCA *testCA
	bundle     string // the sandbox's CA bundle: the sandbox CA only
	secretsDir string
	secret     *secretVolume
	token      string
	// secrets are every value that must never appear in any output: the
	// tokens used so far and the Basic credentials built from them.
	secretsMu sync.Mutex
	secrets   []string
	api       *upstream
	apiState  *fakeAPI
	git       *upstream
	gitState  *gitServer
	proxy     *proxyProc
}

// canary makes a token no other test or output could contain by chance.
func canary(t testing.TB) string {
	t.Helper()
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "ghp_canary" + hex.EncodeToString(b)
}

// newWorld builds the surroundings and starts the proxy with config: a
// file name under testdata/, or an absolute path.
func newWorld(t testing.TB, config string, proxyArgs ...string) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{
		dir:        dir,
		sandboxCA:  newCA(t, filepath.Join(dir, "sandbox-ca"), "keyhole-e2e-sandbox-ca"),
		upstreamCA: newCA(t, filepath.Join(dir, "upstream-ca"), "keyhole-e2e-upstream-ca"),
		secretsDir: filepath.Join(dir, "secrets"),
	}
	w.bundle = filepath.Join(dir, "sandbox", "bundle.pem")
	writeFile(t, w.bundle, w.sandboxCA.CertPEM)
	w.setToken(t, canary(t))
	w.secret = newSecretVolume(t, w.secretsDir, "acme-github-token", map[string]string{
		"user":  "x-access-token",
		"token": w.token + "\n", // kubectl --from-file often leaves a trailing newline
	})
	w.apiState = &fakeAPI{}
	w.apiState.setToken(w.token)
	w.api = startUpstream(t, w.upstreamCA, []string{"api.github.com", "uploads.github.com"}, w.apiState)
	w.gitState = newGitServer(t, filepath.Join(dir, "git-root"))
	w.gitState.setToken(w.token)
	w.git = startUpstream(t, w.upstreamCA, []string{"github.com"}, w.gitState)
	if !filepath.IsAbs(config) {
		config = filepath.Join("testdata", config)
	}
	w.proxy = w.startProxy(t, config, proxyArgs...)
	t.Cleanup(func() {
		w.proxy.stop()
		w.assertNoSecret(t, "proxy stdout", w.proxy.stdout.String())
		w.assertNoSecret(t, "proxy stderr", w.proxy.stderr.String())
		if t.Failed() {
			t.Logf("proxy stderr:\n%s", w.proxy.stderr.String())
		}
	})
	return w
}

// setToken rotates the canary the world expects, remembering the old one
// as a secret too.
func (w *world) setToken(t testing.TB, token string) {
	t.Helper()
	w.secretsMu.Lock()
	defer w.secretsMu.Unlock()
	w.token = token
	w.secrets = append(w.secrets, token,
		base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token)),
		base64.RawStdEncoding.EncodeToString([]byte("x-access-token:"+token)),
	)
}

// plantSecret makes each of vs a secret value of the world: no output may
// hold it.
func (w *world) plantSecret(vs ...string) {
	w.secretsMu.Lock()
	defer w.secretsMu.Unlock()
	w.secrets = append(w.secrets, vs...)
}

// assertNoSecret fails the test if any secret value appears in out.
func (w *world) assertNoSecret(t testing.TB, what, out string) {
	t.Helper()
	w.secretsMu.Lock()
	defer w.secretsMu.Unlock()
	for _, s := range w.secrets {
		if strings.Contains(out, s) {
			t.Errorf("%s holds a secret value (%d bytes of output)", what, len(out))
			return
		}
	}
}

// startProxy runs keyhole-proxy with the config file and this world's CA,
// Secrets and upstreams, plus any extra flags, and waits until /readyz
// answers 200.
func (w *world) startProxy(t testing.TB, config string, extra ...string) *proxyProc {
	t.Helper()
	p := &proxyProc{
		stdout: &proxylog.Buffer{},
		stderr: &proxylog.Buffer{},
		exited: make(chan struct{}),
	}
	abs, err := filepath.Abs(config)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(proxyBin,
		"--config", abs,
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		"--ca-cert", w.sandboxCA.CertFile,
		"--ca-key", w.sandboxCA.KeyFile,
		"--secrets-dir", w.secretsDir,
		"--resolve", "api.github.com:443:"+w.api.addr,
		"--resolve", "uploads.github.com:443:"+w.api.addr,
		"--resolve", "github.com:443:"+w.git.addr,
		"--upstream-ca", w.upstreamCA.CertFile,
	)
	p.cmd.Args = append(p.cmd.Args, extra...)
	// The proxy must ignore a proxy in its own environment: one that
	// points nowhere makes every forwarded request fail if it does not.
	p.cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + w.dir,
		"HTTPS_PROXY=http://127.0.0.1:9",
		"https_proxy=http://127.0.0.1:9",
		"HTTP_PROXY=http://127.0.0.1:9",
		"http_proxy=http://127.0.0.1:9",
		"SSL_CERT_FILE=" + filepath.Join(w.dir, "no-such-bundle.pem"),
	}
	p.cmd.Stdout = p.stdout
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting keyhole-proxy: %v", err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(p.stop)
	deadline := time.Now().Add(15 * time.Second)
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-p.exited:
			t.Fatalf("keyhole-proxy exited before it was ready: %v\nstderr:\n%s", p.cmd.ProcessState, p.stderr.String())
		default:
		}
		if p.addr == "" {
			p.addr, p.admin, _ = proxylog.Bound(p.stderr.String())
		}
		if p.addr != "" && proxylog.Ready(client, p.admin) == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("keyhole-proxy not ready after 15s\nstderr:\n%s", p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ghEnv is sandboxEnv for the real gh, with extra: a config directory of
// its own, and no update notice, prompt or colour.
func (w *world) ghEnv(t testing.TB, extra ...string) []string {
	t.Helper()
	return w.sandboxEnv(t, append([]string{"GH_CONFIG_DIR=" + t.TempDir(), "GH_NO_UPDATE_NOTIFIER=1", "GH_PROMPT_DISABLED=1", "NO_COLOR=1"}, extra...)...)
}

// sandboxEnv is the environment the renderer gives a sandbox: the proxy,
// the placeholder and every CA-bundle variable pointing at the sandbox
// bundle, set explicitly because this machine exports them pointing at the
// system bundle. HOME is a fresh directory so no user config leaks in.
func (w *world) sandboxEnv(t testing.TB, extra ...string) []string {
	t.Helper()
	home := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"LANG=C",
		"HTTPS_PROXY=" + w.proxy.url(),
		"https_proxy=" + w.proxy.url(),
		"HTTP_PROXY=" + w.proxy.url(),
		"http_proxy=" + w.proxy.url(),
		"NO_PROXY=",
		"no_proxy=",
		"REQUESTS_CA_BUNDLE=" + w.bundle,
		"GIT_SSL_CAINFO=" + w.bundle,
		"SSL_CERT_FILE=" + w.bundle,
		"NODE_EXTRA_CA_CERTS=" + w.bundle,
		"CURL_CA_BUNDLE=" + w.bundle,
		"GH_TOKEN=omnia-injected-github-acme",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Sandbox Agent",
		"GIT_AUTHOR_EMAIL=agent@sandbox.invalid",
		"GIT_COMMITTER_NAME=Sandbox Agent",
		"GIT_COMMITTER_EMAIL=agent@sandbox.invalid",
	}
	// pyenv's shims find their interpreter through these.
	for _, k := range []string{"PYENV_ROOT", "PYENV_VERSION"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return append(env, extra...)
}

// clientResult is what a client process printed and how it exited.
type clientResult struct {
	stdout, stderr string
	err            error
}

// runClient runs a sandbox-side tool with the sandbox environment, bounded
// in time, and checks that nothing it printed holds a secret.
func (w *world) runClient(t testing.TB, dir string, env []string, name string, args ...string) clientResult {
	t.Helper()
	return w.runClientWithin(t, 60*time.Second, dir, env, name, args...)
}

// runClientWithin is runClient bounded by limit.
func (w *world) runClientWithin(t testing.TB, limit time.Duration, dir string, env []string, name string, args ...string) clientResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s timed out\nstderr:\n%s", name, strings.Join(args, " "), stderr.String())
	}
	res := clientResult{stdout: stdout.String(), stderr: stderr.String(), err: err}
	w.assertNoSecret(t, filepath.Base(name)+" output", res.stdout+res.stderr)
	return res
}

// curlResult is one curl exchange: the status of the response the client
// saw, the CONNECT status, and the final response's headers and body.
type curlResult struct {
	code    int
	connect int
	header  http.Header
	body    string
	exit    error
	stderr  string
}

// curl fetches url through the proxy with the sandbox environment; args go
// before the URL.
func (w *world) curl(t testing.TB, url string, args ...string) curlResult {
	t.Helper()
	curlBin := requireTool(t, "curl")
	dir := t.TempDir()
	headers := filepath.Join(dir, "headers")
	body := filepath.Join(dir, "body")
	full := append([]string{"-sS", "--max-time", "20", "-D", headers, "-o", body, "-w", "%{http_code} %{http_connect}"}, args...)
	full = append(full, url)
	res := w.runClient(t, dir, w.sandboxEnv(t), curlBin, full...)
	out := curlResult{exit: res.err, stderr: res.stderr}
	if _, err := fmt.Sscanf(res.stdout, "%d %d", &out.code, &out.connect); err != nil {
		t.Fatalf("curl printed %q: %v", res.stdout, err)
	}
	h, _ := os.ReadFile(headers)
	out.header = lastHeaderBlock(string(h))
	b, _ := os.ReadFile(body)
	out.body = string(b)
	w.assertNoSecret(t, "curl response", string(h)+string(b))
	return out
}

// lastHeaderBlock parses the last status line and headers curl dumped:
// after a tunnel, curl writes the CONNECT response first, and 1xx
// responses come before the final one; trailers, which curl writes after
// it without a status line, are not part of it.
func lastHeaderBlock(dump string) http.Header {
	h := http.Header{}
	blocks := strings.Split(strings.ReplaceAll(dump, "\r\n", "\n"), "\n\n")
	last := ""
	for _, b := range blocks {
		if strings.HasPrefix(strings.TrimSpace(b), "HTTP/") {
			last = strings.TrimSpace(b)
		}
	}
	for i, line := range strings.Split(last, "\n") {
		if i == 0 {
			continue // status line
		}
		if k, v, ok := strings.Cut(line, ":"); ok {
			h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
		}
	}
	return h
}

// refusal is the header every refusal carries.
const refusal = "X-Omnia-Egress-Refused"

// wantRefused checks a refusal's status and its single reason header.
func wantRefused(t testing.TB, what string, gotCode int, h http.Header, wantCode int, reason string) {
	t.Helper()
	if gotCode != wantCode {
		t.Errorf("%s: status %d, want %d", what, gotCode, wantCode)
	}
	if got := h.Values(refusal); len(got) != 1 || got[0] != reason {
		t.Errorf("%s: %s = %q, want [%q]", what, refusal, got, reason)
	}
}
