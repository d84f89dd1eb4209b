//go:build e2e

package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/proxylog"
)

// squid is a real Squid forward proxy on loopback that requires basic
// authentication, as a corporate egress proxy does.
type squid struct {
	url       string
	accessLog string
}

// startSquid runs Debian's squid in the foreground on a free loopback
// port with one user, allowing CONNECT (to any port) only when
// authenticated, and stops it when the test ends. Squid drops to the
// proxy user, so its directory is readable by it and its logs writable.
func startSquid(t *testing.T, user, pass string) *squid {
	t.Helper()
	squidBin := requireTool(t, "squid")
	openssl := requireTool(t, "openssl")
	const ncsa = "/usr/lib/squid/basic_ncsa_auth"
	if _, err := os.Stat(ncsa); err != nil {
		t.Fatalf("%s is missing: run apt-get install -y squid", ncsa)
	}
	dir, err := os.MkdirTemp("", "keyhole-e2e-squid-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o777)
	hash, err := exec.Command(openssl, "passwd", "-apr1", pass).Output()
	if err != nil {
		t.Fatalf("openssl passwd: %v", err)
	}
	passwd := filepath.Join(dir, "passwd")
	writeFile(t, passwd, []byte(user+":"+strings.TrimSpace(string(hash))+"\n"))
	os.Chmod(passwd, 0o644)
	s := &squid{accessLog: filepath.Join(dir, "access.log")}
	for _, f := range []string{s.accessLog, filepath.Join(dir, "cache.log")} {
		writeFile(t, f, nil)
		os.Chmod(f, 0o666)
	}
	// Squid takes its port from its config: ask the kernel for a free
	// one, and try another should it be taken before squid binds it.
	for attempt := 0; attempt < 5; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		conf := filepath.Join(dir, "squid.conf")
		writeFile(t, conf, []byte(fmt.Sprintf(`http_port %s
pid_filename %s
cache_log %s
access_log stdio:%s
cache_effective_user proxy
cache deny all
pinger_enable off
shutdown_lifetime 0 seconds
netdb_filename none
logfile_rotate 0
auth_param basic program %s %s
auth_param basic realm keyhole-e2e
acl authed proxy_auth REQUIRED
http_access deny !authed
http_access allow CONNECT authed
http_access deny all
`, addr, filepath.Join(dir, "squid.pid"), filepath.Join(dir, "cache.log"), s.accessLog, ncsa, passwd)))
		os.Chmod(conf, 0o644)
		cmd := exec.Command(squidBin, "-N", "-f", conf)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out := &proxylog.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting squid: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		stop := func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-exited:
				deadline = time.Time{}
				continue
			default:
			}
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				t.Cleanup(stop)
				s.url = "http://" + addr
				return s
			}
			time.Sleep(50 * time.Millisecond)
		}
		stop()
		cacheLog, _ := os.ReadFile(filepath.Join(dir, "cache.log"))
		t.Logf("squid did not start on %s (attempt %d):\n%s%s", addr, attempt+1, out.String(), cacheLog)
	}
	t.Fatal("squid did not start")
	return nil
}

// upstreamProxyConfig writes github-acme.json with an upstreamProxy
// through u, authenticated with Secret corp-proxy, and returns its path.
func upstreamProxyConfig(t *testing.T, u *squid) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "github-acme.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["upstreamProxy"] = map[string]any{
		"url":                  u.url,
		"auth":                 map[string]any{"secret": "corp-proxy", "usernameKey": "username", "passwordKey": "password"},
		"allowInternalAddress": true, // squid listens on loopback
	}
	out, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "upstream-proxy.json")
	writeFile(t, path, out)
	return path
}

// addSecret makes v a secret value of the world too: no output may hold
// it, nor the basic credential made of it.
func (w *world) addSecret(user, v string) {
	w.secretsMu.Lock()
	defer w.secretsMu.Unlock()
	w.secrets = append(w.secrets, v, base64.StdEncoding.EncodeToString([]byte(user+":"+v)))
}

// TestUpstreamSquid: real curl and git in the sandbox, keyhole-proxy
// behind a real Squid that requires basic authentication, and loopback
// HTTPS servers behind that: every upstream connection is a CONNECT
// through Squid with keyhole's credentials for it, TLS to the real host
// runs inside and is verified against the upstream CA, the credential is
// injected as without Squid, and the Squid password appears in no output.
// With the wrong password every request is refused upstream-proxy-failed
// and the log says the proxy asked for credentials.
func TestUpstreamSquid(t *testing.T) {
	proxyPass := canary(t)
	sq := startSquid(t, "keyhole", proxyPass)
	cfg := upstreamProxyConfig(t, sq)

	t.Run("through squid", func(t *testing.T) {
		w := newWorld(t, cfg)
		w.addSecret("keyhole", proxyPass)
		newSecretVolume(t, w.secretsDir, "corp-proxy", map[string]string{"username": "keyhole", "password": proxyPass + "\n"})
		res := w.curl(t, "https://api.github.com/repos/acme/widgets")
		if res.exit != nil || res.code != 200 {
			t.Fatalf("curl through keyhole and squid: %d %v\n%s", res.code, res.exit, res.stderr)
		}
		if len(w.api.find("GET", "/repos/acme/widgets")) == 0 {
			t.Fatal("the upstream saw no request")
		}
		w.gitClone(t, "https://github.com/acme/widgets.git")
		if !w.sawBasicToken(w.git.find("POST", "/acme/widgets.git/git-upload-pack")) {
			t.Errorf("the upload-pack request did not carry the injected credential")
		}
		// Squid logs a tunnel when it closes: stop the proxy, which
		// closes its pooled ones.
		w.proxy.stop()
		var access []byte
		eventually(t, "squid's access log names an authenticated CONNECT to each upstream", func() bool {
			access, _ = os.ReadFile(sq.accessLog)
			return strings.Contains(string(access), "CONNECT "+w.api.addr+" keyhole ") &&
				strings.Contains(string(access), "CONNECT "+w.git.addr+" keyhole ")
		})
		w.assertNoSecret(t, "squid's access log", string(access))
	})

	t.Run("wrong password", func(t *testing.T) {
		w := newWorld(t, cfg)
		wrong := canary(t)
		w.addSecret("keyhole", wrong)
		newSecretVolume(t, w.secretsDir, "corp-proxy", map[string]string{"username": "keyhole", "password": wrong})
		res := w.curl(t, "https://api.github.com/repos/acme/widgets")
		wantRefused(t, "curl through squid with the wrong password", res.code, res.header, 502, "upstream-proxy-failed")
		if !strings.Contains(res.body, "refused the credentials of Secret corp-proxy (407)") {
			t.Errorf("the refusal does not say why: %q", res.body)
		}
		eventually(t, "the proxy's log names the cause", func() bool {
			return strings.Contains(w.proxy.stderr.String(), `"cause":"auth-required"`)
		})
		w.assertNoSecret(t, "the refusal", res.body)
	})
}
