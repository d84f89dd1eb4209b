package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"keyhole.dev/keyhole/internal/proxylog"
	"keyhole.dev/keyhole/internal/testpki"
)

// The hosts of the soak. Every one resolves to the one local upstream.
const (
	apiHost  = "api.soak.test"  // header injection, method/path/body rules
	gitHost  = "git.soak.test"  // basic auth, path patterns
	upHost   = "up.soak.test"   // substitution of a placeholder
	gwHost   = "gw.soak.test"   // header from a dotted key, {{ index . "tls.key" }}
	passHost = "pass.soak.test" // passthrough: tunnelled, never injected
	evilHost = "evil.soak.test" // not allowed

	tokenSecret = "soak-token" // keys token, user
	certSecret  = "soak-cert"  // key tls.key

	placeholder    = "omnia-injected-soak"
	upPlaceholder  = "omnia-injected-soak-up"
	togglePath     = "/repos/acme/gadgets" // allowed only by config B
	secretKeyToken = "token"
)

// env is what the proxy runs against: CAs, mounted Secrets, the config
// and the upstream.
type env struct {
	dir        string
	sandboxCA  *testpki.FileCA
	upstreamCA *testpki.FileCA
	secrets    *secretStore
	configFile string
	up         *upstream
}

func newEnv(dir string) (*env, error) {
	e := &env{dir: dir}
	var err error
	if e.sandboxCA, err = testpki.NewFileCA(dir, "sandbox-ca"); err != nil {
		return nil, err
	}
	if e.upstreamCA, err = testpki.NewFileCA(dir, "upstream-ca"); err != nil {
		return nil, err
	}
	e.secrets = &secretStore{dir: filepath.Join(dir, "secrets"), grace: 5 * time.Second}
	if err := e.secrets.rotate(); err != nil {
		return nil, err
	}
	e.configFile = filepath.Join(dir, "proxy.json")
	if err := e.writeConfig(false); err != nil {
		return nil, err
	}
	leaf, err := e.upstreamCA.Leaf(apiHost, gitHost, upHost, gwHost, passHost)
	if err != nil {
		return nil, err
	}
	e.up, err = startUpstream(leaf, e.secrets)
	return e, err
}

func (e *env) close() { e.up.close() }

// writeConfig writes config A, or B, which also allows GET togglePath,
// atomically (a rename), as a ConfigMap update lands.
func (e *env) writeConfig(b bool) error {
	apiRules := []any{
		map[string]any{"methods": []string{"GET", "HEAD"}, "pathPrefixes": []string{"/repos/acme/widgets"}},
		map[string]any{"methods": []string{"POST"}, "pathPrefixes": []string{"/repos/acme/widgets/pulls"}, "body": map[string][]string{"state": {"open"}}},
	}
	if b {
		apiRules = append(apiRules, map[string]any{"methods": []string{"GET"}, "pathPrefixes": []string{togglePath}})
	}
	cfg := map[string]any{
		"apiVersion": "proxy.keyhole.dev/v1alpha1",
		"kind":       "ProxyConfig",
		"sandbox":    map[string]string{"namespace": "soak", "name": "soak"},
		"hosts": []any{
			map[string]any{"name": apiHost, "connection": "soak",
				"inject": map[string]any{"secret": tokenSecret, "header": map[string]string{"name": "Authorization", "value": "Bearer {{ .token }}"}},
				"rules":  apiRules},
			map[string]any{"name": gitHost, "connection": "soak",
				"inject": map[string]any{"secret": tokenSecret, "basic": map[string]string{"usernameKey": "user", "passwordKey": "token"}},
				"rules": []any{
					map[string]any{"methods": []string{"GET"}, "pathPatterns": []string{"/*/*/info/refs"}},
					map[string]any{"methods": []string{"POST"}, "pathPatterns": []string{"/*/*/git-upload-pack"}},
				}},
			map[string]any{"name": gwHost, "connection": "soak-gw",
				"inject": map[string]any{"secret": certSecret, "header": map[string]string{"name": "X-Client-Key", "value": `{{ index . "tls.key" }}`}}},
			map[string]any{"name": upHost, "connection": "soak-up",
				"inject": map[string]any{"secret": tokenSecret, "substitute": map[string]string{"placeholder": upPlaceholder, "key": "token"}}},
		},
		"passthrough": []string{passHost},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return err
	}
	tmp := e.configFile + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, e.configFile)
}

// secretStore writes the two Secrets in the kubelet's layout and knows
// which values are current: <dir>/<secret>/..<timestamp>/<key> holds the
// values, ..data links to the timestamped directory, and each <key> links
// through ..data. A rotation writes a new timestamped directory, points
// ..data_tmp at it and renames ..data_tmp over ..data: one atomic swap.
type secretStore struct {
	dir   string
	grace time.Duration

	mu        sync.Mutex
	gen       int
	cur, prev map[string]string // "secret/key" → value
	pending   map[string]string // written, not yet known to be swapped in
	rotatedAt time.Time
	ever      []string
}

var secretKeys = map[string][]string{tokenSecret: {"token", "user"}, certSecret: {"tls.key"}}

// rotate writes new values for every key and swaps them in.
func (s *secretStore) rotate() error {
	s.mu.Lock()
	s.gen++
	gen := s.gen
	next := map[string]string{}
	for secret, keys := range secretKeys {
		for _, k := range keys {
			b := make([]byte, 12)
			if _, err := rand.Read(b); err != nil {
				s.mu.Unlock()
				return err
			}
			next[secret+"/"+k] = fmt.Sprintf("soak-%s-%d-%s", strings.ReplaceAll(k, ".", ""), gen, hex.EncodeToString(b))
		}
	}
	for _, v := range next {
		s.ever = append(s.ever, v)
	}
	// The upstream accepts the new values from the moment they may be
	// read, before the swap.
	s.pending = next
	s.mu.Unlock()

	for secret, keys := range secretKeys {
		data := map[string]string{}
		for _, k := range keys {
			data[k] = next[secret+"/"+k] + "\n"
		}
		if err := kubeletWrite(filepath.Join(s.dir, secret), gen, data); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.prev, s.cur, s.pending, s.rotatedAt = s.cur, next, nil, time.Now()
	s.mu.Unlock()
	return nil
}

// kubeletWrite is the kubelet's atomic writer for one Secret volume.
func kubeletWrite(dir string, gen int, data map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ts := fmt.Sprintf("..%s.%d", time.Now().UTC().Format("2006_01_02_15_04_05"), gen)
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		return err
	}
	for k, v := range data {
		if err := os.WriteFile(filepath.Join(dir, ts, k), []byte(v), 0o644); err != nil {
			return err
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	os.Remove(tmp)
	if err := os.Symlink(ts, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for k := range data {
		link := filepath.Join(dir, k)
		if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
			if err := os.Symlink(filepath.Join("..data", k), link); err != nil {
				return err
			}
		}
	}
	if old != "" {
		return os.RemoveAll(filepath.Join(dir, old))
	}
	return nil
}

// Credential classes, as the upstream sees a value.
const (
	credCurrent  = "current"
	credPrevious = "previous" // the value before the last rotation, within the grace after it
	credStale    = "stale"    // the previous value, later than the grace: a rotation not seen
	credWrong    = "wrong"    // no value the Secret ever held lately
)

// classify says what value is, for secret/key.
func (s *secretStore) classify(secretKey, value string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case value == s.cur[secretKey] || s.pending != nil && value == s.pending[secretKey]:
		return credCurrent
	case s.prev != nil && value == s.prev[secretKey]:
		if time.Since(s.rotatedAt) <= s.grace {
			return credPrevious
		}
		return credStale
	}
	return credWrong
}

// everValue is every value the Secrets ever held.
func (s *secretStore) everValue() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.ever...)
}

// upstream is the TLS server every host resolves to. It answers each
// host's requests only when they carry that host's credential, tells the
// client how it classed the credential in X-Soak-Cred, and never echoes a
// request header.
type upstream struct {
	srv     *http.Server
	ln      net.Listener
	addr    string
	secrets *secretStore

	mu     sync.Mutex
	counts map[string]int64 // host + " " + class
}

func startUpstream(cert tls.Certificate, s *secretStore) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u := &upstream{ln: ln, addr: ln.Addr().String(), secrets: s, counts: map[string]int64{}}
	u.srv = &http.Server{
		Handler:           http.HandlerFunc(u.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	u.srv.SetKeepAlivesEnabled(true)
	go u.srv.ServeTLS(ln, "", "")
	return u, nil
}

func (u *upstream) close() { u.srv.Close() }

func (u *upstream) count(host, class string) {
	u.mu.Lock()
	u.counts[host+" "+class]++
	u.mu.Unlock()
}

func (u *upstream) totals() map[string]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]int64{}
	for k, v := range u.counts {
		out[k] = v
	}
	return out
}

// filler is a response body: 1 KiB, or 256 KiB for /big.
var filler = strings.Repeat("keyhole soak filler line, nothing secret in it\n", 22)

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	host, _, err := net.SplitHostPort(r.Host)
	if err != nil {
		host = r.Host
	}
	// Read the body first: a client that vanished mid-body leaves a
	// short one, which is what the soak does on purpose.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		u.count(host, "body cut short")
		return
	}
	var class string
	switch host {
	case apiHost:
		class = u.bearer(r.Header.Get("Authorization"), "Bearer ", tokenSecret+"/token")
	case upHost:
		class = u.bearer(r.Header.Get("Authorization"), "token ", tokenSecret+"/token")
	case gwHost:
		class = u.secrets.classify(certSecret+"/tls.key", r.Header.Get("X-Client-Key"))
	case gitHost:
		class = credWrong
		if user, pass, ok := r.BasicAuth(); ok {
			class = worse(u.secrets.classify(tokenSecret+"/user", user), u.secrets.classify(tokenSecret+"/token", pass))
		}
	case passHost:
		// Tunnelled untouched: the placeholder arrives as sent, and no
		// value of the Secret is anywhere in the request.
		class = "untouched"
		if r.Header.Get("Authorization") != "Bearer "+placeholder {
			class = "placeholder changed"
		}
		for _, vs := range r.Header {
			for _, v := range vs {
				for _, s := range u.secrets.everValue() {
					if strings.Contains(v, s) {
						class = "secret on a passthrough host"
					}
				}
			}
		}
	default:
		class = "unknown host"
	}
	u.count(host, class)
	w.Header().Set("X-Soak-Cred", class)
	if class != credCurrent && class != credPrevious && class != "untouched" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	n := 1
	if strings.HasSuffix(r.URL.Path, "/big") {
		n = 256
	}
	for i := 0; i < n; i++ {
		if _, err := io.WriteString(w, filler); err != nil {
			return
		}
	}
}

// bearer classes a header of the form prefix+value.
func (u *upstream) bearer(h, prefix, secretKey string) string {
	v, ok := strings.CutPrefix(h, prefix)
	if !ok {
		return credWrong
	}
	return u.secrets.classify(secretKey, v)
}

// worse returns the worse of two classes.
func worse(a, b string) string {
	rank := map[string]int{credCurrent: 0, credPrevious: 1, credStale: 2, credWrong: 3}
	if rank[b] > rank[a] {
		return b
	}
	return a
}

// proxyProc is the keyhole-proxy process.
type proxyProc struct {
	cmd     *exec.Cmd
	logFile string
	addr    string // the sandbox's proxy address
	admin   string
	waited  chan error
}

// startProxy runs the binary on ephemeral loopback ports, logging to a
// file, and waits until it is ready.
func (e *env) startProxy(bin string) (*proxyProc, error) {
	p := &proxyProc{logFile: filepath.Join(e.dir, "proxy.log"), waited: make(chan error, 1)}
	log, err := os.Create(p.logFile)
	if err != nil {
		return nil, err
	}
	args := []string{
		"--config", e.configFile,
		"--listen", "127.0.0.1:0",
		"--admin-listen", "127.0.0.1:0",
		"--ca-cert", e.sandboxCA.CertFile,
		"--ca-key", e.sandboxCA.KeyFile,
		"--secrets-dir", e.secrets.dir,
		"--upstream-ca", e.upstreamCA.CertFile,
		"--reload-interval", "2s",
		"--shutdown-timeout", "10s",
	}
	for _, h := range []string{apiHost, gitHost, upHost, gwHost, passHost} {
		args = append(args, "--resolve", h+":443:"+e.up.addr)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + e.dir}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	go func() {
		p.waited <- p.cmd.Wait()
		log.Close()
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p.addr, p.admin, err = proxylog.BoundAddrs(p.logFile); err == nil && proxylog.Ready(http.DefaultClient, p.admin) == nil {
			return p, nil
		}
		select {
		case err := <-p.waited:
			p.waited <- err
			return nil, fmt.Errorf("keyhole-proxy exited before it was ready: %v; its log: %s", err, tail(p.logFile))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.kill()
			return nil, fmt.Errorf("keyhole-proxy was not ready within 30s; its log: %s", tail(p.logFile))
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// procSample is what the proxy process holds at one moment.
type procSample struct {
	at         time.Time
	rssKiB     int64
	fds        int
	goroutines int
	tunnels    int
}

// sample reads the proxy's RSS and open files from /proc and its
// goroutines and open tunnels from /metrics.
func (p *proxyProc) sample(now time.Time) (procSample, error) {
	s := procSample{at: now}
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	if s.rssKiB, err = statusField(string(status), "VmRSS:"); err != nil {
		return s, err
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return s, err
	}
	s.fds = len(fds)
	m := p.metricsText()
	s.goroutines = int(metricValue(m, "keyhole_proxy_goroutines"))
	s.tunnels = int(metricValue(m, "keyhole_proxy_tunnels_active"))
	if !strings.Contains(m, "keyhole_proxy_goroutines ") {
		return s, errors.New("/metrics has no keyhole_proxy_goroutines")
	}
	return s, nil
}

// statusField reads a "Name:   123 kB" line of /proc/<pid>/status.
func statusField(status, name string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == name {
			return strconv.ParseInt(f[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s line", name)
}

// metricsText scrapes /metrics; "" when it cannot.
func (p *proxyProc) metricsText() string {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + p.admin + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricValue sums the samples of one metric (all label sets) in a
// Prometheus text exposition.
func metricValue(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) || strings.HasPrefix(line, "#") {
			continue
		}
		rest := line[len(name):]
		if rest == "" || rest[0] != ' ' && rest[0] != '{' {
			continue
		}
		f := strings.Fields(rest)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proxyProc) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case err := <-p.waited:
		p.waited <- err
		if err != nil {
			return fmt.Errorf("exited with %v", err)
		}
		if !strings.Contains(tail(p.logFile), `"msg":"keyhole-proxy stopped"`) {
			return errors.New(`no "keyhole-proxy stopped" line in its log`)
		}
		return nil
	case <-time.After(30 * time.Second):
		p.kill()
		return errors.New("did not stop within 30s of SIGTERM")
	}
}

// kill ends the process if it still runs.
func (p *proxyProc) kill() {
	select {
	case err := <-p.waited:
		p.waited <- err
	default:
		p.cmd.Process.Kill()
		err := <-p.waited
		p.waited <- err
	}
}

// changeLoop rotates the Secrets every o.rotate and swaps the config
// every o.reload, half a rotation period out of step, until ctx ends.
// After each change it probes until the proxy acts on it and records how
// long that took.
func (e *env) changeLoop(ctx context.Context, o options, p *proxyProc, tr *traffic, rep *report) error {
	rot := time.NewTicker(o.rotate)
	defer rot.Stop()
	first := time.NewTimer(o.rotate / 2)
	defer first.Stop()
	var rel <-chan time.Time
	var relTicker *time.Ticker
	defer func() {
		if relTicker != nil {
			relTicker.Stop()
		}
	}()
	phaseB := false
	probe := newProbe(e, p.addr)
	defer probe.close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-rot.C:
			if err := e.secrets.rotate(); err != nil {
				return err
			}
			// The proxy promises that a change made before a request
			// arrives is seen by that request: the very next request must
			// carry the new value.
			class, err := probe.cred()
			rep.addRotation(class, err)
		case <-first.C:
			relTicker = time.NewTicker(o.reload)
			rel = relTicker.C
			phaseB = !phaseB
			if err := e.swap(ctx, phaseB, tr, probe, rep); err != nil {
				return err
			}
		case <-rel:
			phaseB = !phaseB
			if err := e.swap(ctx, phaseB, tr, probe, rep); err != nil {
				return err
			}
		}
	}
}

// swap writes config B (or A), tells the traffic, and waits for the
// proxy to act on it.
func (e *env) swap(ctx context.Context, b bool, tr *traffic, probe *probe, rep *report) error {
	tr.setPhase(b)
	start := time.Now()
	if err := e.writeConfig(b); err != nil {
		return err
	}
	for time.Since(start) < 30*time.Second {
		if ctx.Err() != nil {
			return nil
		}
		if allowed, err := probe.toggleAllowed(); err == nil && allowed == b {
			rep.addReload(time.Since(start), nil)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	rep.addReload(time.Since(start), errors.New("the proxy did not act on the new config within 30s"))
	return nil
}
