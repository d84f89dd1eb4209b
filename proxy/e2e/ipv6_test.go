//go:build e2e

package e2e

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/proxylog"
)

// TestTransparentIPv6Only: in a sandbox pod whose network is IPv6 only,
// with the transparent rules installed by transparent-init, the proxy's
// own connections to an IPv6 upstream go through (the kernel's neighbour
// discovery passes the filter), while the sandbox's IPv6 egress is still
// refused. Two network namespaces of the test's own: "up" holds the
// upstream at fd6b:6c::1, "sb" the proxy (as its own user) and the
// sandbox at fd6b:6c::2, on one link with no IPv4 address; /etc/hosts in
// "sb" names pass6.example at the upstream's address.
func TestTransparentIPv6Only(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the transparent-mode tests create network namespaces and iptables rules: run them as root")
	}
	ipTool := requireTool(t, "ip")
	requireTool(t, "setpriv")
	requireTool(t, "iptables-restore")
	requireTool(t, "ip6tables-restore")
	sfx := make([]byte, 3)
	rand.Read(sfx)
	id := hex.EncodeToString(sfx)
	nsUp, nsSb := "kh6-up-"+id, "kh6-sb-"+id
	etcDir := filepath.Join("/etc/netns", nsSb)
	_, statErr := os.Stat("/etc/netns")
	madeEtcNetns := os.IsNotExist(statErr)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(ipTool, args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		for _, ns := range []string{nsSb, nsUp} {
			exec.Command(ipTool, "netns", "del", ns).Run()
		}
		os.RemoveAll(etcDir)
		if madeEtcNetns {
			os.Remove("/etc/netns") // only if empty: another test's may be there
		}
	})
	run("netns", "add", nsUp)
	run("netns", "add", nsSb)
	run("-n", nsUp, "link", "add", "k6u"+id, "type", "veth", "peer", "name", "k6s"+id, "netns", nsSb)
	for _, c := range [][]string{
		{"-n", nsUp, "link", "set", "lo", "up"},
		{"-n", nsUp, "link", "set", "k6u" + id, "up"},
		{"-n", nsUp, "addr", "add", "fd6b:6c::1/64", "dev", "k6u" + id, "nodad"},
		{"-n", nsSb, "link", "set", "lo", "up"},
		{"-n", nsSb, "link", "set", "k6s" + id, "up"},
		{"-n", nsSb, "addr", "add", "fd6b:6c::2/64", "dev", "k6s" + id, "nodad"},
		{"-n", nsSb, "-6", "route", "add", "default", "via", "fd6b:6c::1"},
	} {
		run(c...)
	}
	if err := os.MkdirAll(etcDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"hosts":       "127.0.0.1 localhost\n::1 localhost\nfd6b:6c::1 pass6.example\n",
		"resolv.conf": "search agents.svc.cluster.local svc.cluster.local cluster.local\nnameserver fd6b:6c::1\noptions ndots:5\n",
	} {
		writeFile(t, filepath.Join(etcDir, name), []byte(data))
		os.Chmod(filepath.Join(etcDir, name), 0o644) // as in a pod: the proxy's user reads them
	}

	// The proxy's files: its CA and a Secret, readable by its user.
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755)
	os.Chmod(dir, 0o755)
	ca := newCA(t, filepath.Join(dir, "sandbox-ca"), "keyhole-e2e-sandbox-ca")
	secretsDir := filepath.Join(dir, "secrets")
	newSecretVolume(t, secretsDir, "acme-github-token", map[string]string{"user": "x-access-token", "token": canary(t)})
	for _, d := range []string{secretsDir, filepath.Join(dir, "sandbox-ca")} {
		filepath.Walk(d, func(p string, _ os.FileInfo, _ error) error { return os.Lchown(p, proxyUID, proxyUID) })
	}

	var upstream *atomic.Int32
	inNetns(t, nsUp, func() { upstream = countTCP(t, "[fd6b:6c::1]:443") })

	// The rules, as the init container installs them, before anything
	// in the pod has reached a neighbour.
	uid := fmt.Sprint(proxyUID)
	if out, err := exec.Command(ipTool, "netns", "exec", nsSb, proxyBin, "transparent-init",
		"--proxy-uid", uid, "--port", "3129", "--dns-port", "3053", "--admin-port", "9090").CombinedOutput(); err != nil {
		t.Fatalf("transparent-init: %v\n%s", err, out)
	}

	logs := &proxylog.Buffer{}
	startSidecar(t, ipTool, nsSb, logs, nil, "--ca-cert", ca.CertFile, "--ca-key", ca.KeyFile, "--secrets-dir", secretsDir)

	dial, stop := nsDialer(t, nsSb)
	defer stop()

	// The sandbox's own IPv6 egress: refused by the rules, before any
	// neighbour is asked.
	if c, err := dial("[fd6b:6c::1]:443"); err == nil {
		c.Close()
		t.Error("the sandbox connected to [fd6b:6c::1]:443 past the proxy")
	}

	// The proxy's: a passthrough tunnel to the IPv6 upstream.
	conn, err := dial("127.0.0.1:3128")
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := conn.Write([]byte("CONNECT pass6.example:443 HTTP/1.1\r\nHost: pass6.example:443\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("CONNECT pass6.example:443: %s; want the proxy to reach [fd6b:6c::1]:443", resp.Status)
	}
	eventually(t, "the upstream accepting the proxy's connection", func() bool { return upstream.Load() == 1 })
}
