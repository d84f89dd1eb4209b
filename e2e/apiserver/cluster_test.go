//go:build e2e

package apiserver

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/testpki"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/schema"
)

// Bounds on the servers. Startup on a busy 2-core machine takes seconds;
// these only stop a broken run from hanging the whole test binary.
const (
	etcdReadyTimeout      = 60 * time.Second
	apiserverReadyTimeout = 3 * time.Minute
	kubectlTimeout        = 2 * time.Minute
	stopTimeout           = 15 * time.Second
	// startAttempts retries a start whose port another process took
	// between freePorts closing it and the server binding it.
	startAttempts = 3
)

// the is the cluster TestMain starts for every test in this package. It
// is written once, before m.Run, and only read after.
var the *cluster

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx := context.Background()
	c, err := startCluster(ctx)
	if c != nil {
		defer c.stop()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/apiserver: %v\n", err)
		return 1
	}
	the = c
	return m.Run()
}

// cluster is an etcd and a kube-apiserver on loopback, and the kubectl
// that talks to them.
type cluster struct {
	repo       string // the keyhole repository's root
	dir        string // certificates, etcd data, logs, kubeconfig
	kubectlBin string
	kubeconfig string
	procs      []*proc // started in order, stopped in reverse
}

// proc is a server the cluster started; log holds its combined output.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // its exit status, once done is closed
}

func startCluster(ctx context.Context) (*cluster, error) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(repo, "scripts", "kube-apiserver.sh")); err != nil {
		return nil, fmt.Errorf("cannot find the repository root from the test's directory: %w", err)
	}
	kubectlBin, err := lookKubectl()
	if err != nil {
		return nil, err
	}
	// The script installs etcd when it is missing, so look for it after.
	apiserverBin, err := locateAPIServer(repo)
	if err != nil {
		return nil, err
	}
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		return nil, fmt.Errorf("etcd is not installed: run scripts/kube-apiserver.sh (it installs it) or apt-get install -y etcd-server: %w", err)
	}
	dir, err := os.MkdirTemp("", "keyhole-e2e-apiserver-")
	if err != nil {
		return nil, err
	}
	c := &cluster{repo: repo, dir: dir, kubectlBin: kubectlBin}
	if err := os.Mkdir(filepath.Join(dir, "home"), 0o700); err != nil {
		return c, err
	}
	p, err := writePKI(dir)
	if err != nil {
		return c, fmt.Errorf("generating certificates: %w", err)
	}
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		lastErr = c.startServers(ctx, etcdBin, apiserverBin, p, attempt)
		if lastErr == nil {
			break
		}
		c.stopProcs()
		if !errors.Is(lastErr, errPortTaken) {
			break
		}
	}
	if lastErr != nil {
		return c, lastErr
	}
	if err := c.installCRDs(ctx); err != nil {
		return c, fmt.Errorf("installing CRDs: %w", err)
	}
	return c, nil
}

// lookKubectl prefers the machine's /usr/bin/kubectl, the one the
// test dependencies install, and falls back to PATH.
func lookKubectl() (string, error) {
	if fi, err := os.Stat("/usr/bin/kubectl"); err == nil && fi.Mode()&0o111 != 0 {
		return "/usr/bin/kubectl", nil
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		return "", fmt.Errorf("kubectl is not installed: run scripts/test-deps.sh or install kubectl from the Kubernetes apt repository: %w", err)
	}
	return p, nil
}

// locateAPIServer returns $KEYHOLE_KUBE_APISERVER when set, and otherwise
// runs scripts/kube-apiserver.sh, which prints the cached binary's path at
// once when it is current and builds it (about ten minutes) when
// it is not.
func locateAPIServer(repo string) (string, error) {
	if p := os.Getenv("KEYHOLE_KUBE_APISERVER"); p != "" {
		fi, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("KEYHOLE_KUBE_APISERVER=%s: %w (unset it to let scripts/kube-apiserver.sh build one)", p, err)
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("KEYHOLE_KUBE_APISERVER=%s is not an executable file", p)
		}
		return p, nil
	}
	script := filepath.Join(repo, "scripts", "kube-apiserver.sh")
	cmd := exec.Command(script)
	cmd.Dir = repo
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/kube-apiserver.sh could not build kube-apiserver (%w); run it by hand to see why, or set KEYHOLE_KUBE_APISERVER to a kube-apiserver binary", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	p := lines[len(lines)-1]
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("scripts/kube-apiserver.sh printed %q, which is not a file: %w", p, err)
	}
	return p, nil
}

// Why a server did not become ready. errPortTaken, a port another process
// took between freePorts closing it and the server binding it, is the
// one startCluster retries with new ports.
var (
	errExitedEarly = errors.New("exited before it was ready")
	errPortTaken   = errors.New("a port it was given was taken")
)

func (c *cluster) startServers(ctx context.Context, etcdBin, apiserverBin string, p pki, attempt int) error {
	ports, err := freePorts(3)
	if err != nil {
		return err
	}
	etcdClient, etcdPeer, securePort := ports[0], ports[1], ports[2]
	clientURL := "http://127.0.0.1:" + strconv.Itoa(etcdClient)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(etcdPeer)
	suffix := "-" + strconv.Itoa(attempt)
	etcd, err := c.start("etcd", etcdBin, "etcd"+suffix+".log",
		"--name=keyhole-e2e",
		"--data-dir="+filepath.Join(c.dir, "etcd"+suffix),
		"--listen-client-urls="+clientURL,
		"--advertise-client-urls="+clientURL,
		"--listen-peer-urls="+peerURL,
		"--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=keyhole-e2e="+peerURL,
	)
	if err != nil {
		return err
	}
	if err := waitReady(ctx, etcd, etcdReadyTimeout, func(ctx context.Context) bool {
		return get(ctx, http.DefaultClient, clientURL+"/health", "") == http.StatusOK
	}); err != nil {
		return err
	}
	apiserver, err := c.start("kube-apiserver", apiserverBin, "kube-apiserver"+suffix+".log",
		"--etcd-servers="+clientURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(securePort),
		"--cert-dir="+filepath.Join(c.dir, "apiserver-certs"),
		"--tls-cert-file="+p.certFile,
		"--tls-private-key-file="+p.keyFile,
		"--token-auth-file="+p.tokenFile,
		"--anonymous-auth=false",
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+p.saPubFile,
		"--service-account-signing-key-file="+p.saKeyFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--profiling=false",
		// The endpoint reconciler refuses a loopback advertise address;
		// nothing here routes to the kubernetes Service anyway.
		"--endpoint-reconciler-type=none",
	)
	if err != nil {
		return err
	}
	server := "https://127.0.0.1:" + strconv.Itoa(securePort)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	if err := waitReady(ctx, apiserver, apiserverReadyTimeout, func(ctx context.Context) bool {
		return get(ctx, client, server+"/readyz", p.token) == http.StatusOK
	}); err != nil {
		return err
	}
	return c.writeKubeconfig(server, p)
}

// start runs a server with its output in a log file under c.dir.
func (c *cluster) start(name, bin, logName string, args ...string) (*proc, error) {
	logPath := filepath.Join(c.dir, logName)
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.dir
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	c.procs = append(c.procs, p)
	return p, nil
}

// waitReady polls ready until it holds, the process exits, or timeout.
func waitReady(ctx context.Context, p *proc, timeout time.Duration, ready func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx) {
			return nil
		}
		select {
		case <-p.done:
			log := tail(p.log, 40)
			if strings.Contains(log, "address already in use") {
				return fmt.Errorf("%s: %w:\n%s", p.name, errPortTaken, log)
			}
			return fmt.Errorf("%s %w (%v); the end of its log:\n%s", p.name, errExitedEarly, p.err, log)
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready within %s; the end of its log:\n%s", p.name, timeout, tail(p.log, 40))
		case <-tick.C:
		}
	}
}

// get returns the status of a GET, or 0 when the request fails.
func get(ctx context.Context, client *http.Client, url, token string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// tail returns the last n lines of a log file, for an error message.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct loopback ports that were free a moment ago.
// All n listeners are open at once so the ports differ.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// stop ends the servers and removes the cluster's directory.
func (c *cluster) stop() {
	c.stopProcs()
	os.RemoveAll(c.dir)
}

// stopProcs sends SIGTERM, newest first, and SIGKILL to any server still
// running after stopTimeout.
func (c *cluster) stopProcs() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(stopTimeout):
			p.cmd.Process.Kill()
			<-p.done
		}
	}
	c.procs = nil
}

// pki is the files kube-apiserver is started with.
type pki struct {
	caPEM     []byte
	certFile  string // serving certificate for 127.0.0.1, signed by the CA
	keyFile   string
	saKeyFile string // signs service account tokens
	saPubFile string // verifies them
	tokenFile string // one admin user in system:masters
	token     string
}

// writePKI generates a CA, a serving certificate, a service account key
// and an admin token under dir. Everything is fresh per run and lives
// only as long as the test.
func writePKI(dir string) (pki, error) {
	p := pki{
		certFile:  filepath.Join(dir, "serving.crt"),
		keyFile:   filepath.Join(dir, "serving.key"),
		saKeyFile: filepath.Join(dir, "service-account.key"),
		saPubFile: filepath.Join(dir, "service-account.pub"),
		tokenFile: filepath.Join(dir, "tokens.csv"),
	}
	ca, err := testpki.NewCA("keyhole-e2e-ca")
	if err != nil {
		return p, err
	}
	p.caPEM = ca.CertPEM
	certPEM, keyPEM, err := ca.LeafPEM("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "10.0.0.1")
	if err != nil {
		return p, err
	}
	if err := os.WriteFile(p.certFile, certPEM, 0o600); err != nil {
		return p, err
	}
	if err := os.WriteFile(p.keyFile, keyPEM, 0o600); err != nil {
		return p, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return p, err
	}
	if err := writeKey(p.saKeyFile, saKey); err != nil {
		return p, err
	}
	// --service-account-key-file reads public keys, which a PKCS #8
	// private key is not to it.
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return p, err
	}
	if err := os.WriteFile(p.saPubFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o600); err != nil {
		return p, err
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return p, err
	}
	p.token = hex.EncodeToString(tok)
	// token,user,uid,"groups": system:masters is allowed everything by
	// the RBAC bootstrap policy.
	line := p.token + `,keyhole-e2e-admin,keyhole-e2e-admin,"system:masters"` + "\n"
	return p, os.WriteFile(p.tokenFile, []byte(line), 0o600)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// writeKubeconfig writes the kubeconfig kubectl uses: the generated CA,
// the loopback server and the admin token.
func (c *cluster) writeKubeconfig(server string, p pki) error {
	cfg := map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"current-context": "keyhole-e2e",
		"clusters": []any{map[string]any{
			"name": "keyhole-e2e",
			"cluster": map[string]any{
				"server":                     server,
				"certificate-authority-data": base64.StdEncoding.EncodeToString(p.caPEM),
			},
		}},
		"users": []any{map[string]any{
			"name": "keyhole-e2e-admin",
			"user": map[string]any{"token": p.token},
		}},
		"contexts": []any{map[string]any{
			"name":    "keyhole-e2e",
			"context": map[string]any{"cluster": "keyhole-e2e", "user": "keyhole-e2e-admin"},
		}},
	}
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	return os.WriteFile(c.kubeconfig, b, 0o600)
}

// kubectl runs the machine's kubectl against the cluster, with its own
// HOME so its discovery cache is fresh per run and never the user's.
func (c *cluster) kubectl(ctx context.Context, stdin []byte, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	full := append([]string{"--kubeconfig=" + c.kubeconfig, "--request-timeout=60s"}, args...)
	cmd := exec.CommandContext(ctx, c.kubectlBin, full...)
	cmd.Dir = c.dir
	cmd.Env = append(withoutKubeEnv(os.Environ()), "HOME="+filepath.Join(c.dir, "home"))
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err = cmd.Run()
	if err != nil {
		shown := args
		if len(shown) > 8 { // a long list of -f FILE says nothing the error does not
			shown = append(slices.Clone(shown[:6]), "...")
		}
		err = fmt.Errorf("kubectl %s: %w\n%s", strings.Join(shown, " "), err, errb.String())
	}
	return out.String(), errb.String(), err
}

// withoutKubeEnv drops the variables that would point kubectl at another
// cluster or home directory.
func withoutKubeEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "KUBECONFIG=") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// installCRDs installs, as a cluster running the omnia operator has them,
// the operator's own CRDs for AgentRuntime and ToolRegistry (the release
// keyhole carries, schema.OperatorCRDs), then keyhole's (schema.CRDs, what
// `keyhole schema --crds` prints: Connection and SandboxClass) next to
// them, and cert-manager's (the pinned copies the render tests validate
// against), each applied with strict field validation, and waits until
// the server serves them.
func (c *cluster) installCRDs(ctx context.Context) error {
	operator, err := schema.OperatorCRDs(schema.OperatorVersions()[0])
	if err != nil {
		return err
	}
	operatorCRDs := filepath.Join(c.dir, "operator-crds.yaml")
	if err := os.WriteFile(operatorCRDs, operator, 0o600); err != nil {
		return err
	}
	keyholeCRDs := filepath.Join(c.dir, "keyhole-crds.yaml")
	if err := os.WriteFile(keyholeCRDs, schema.CRDs(), 0o600); err != nil {
		return err
	}
	certManager, err := filepath.Glob(filepath.Join(c.repo, "render", "testdata", "cert-manager-crds", "*.yaml"))
	if err != nil {
		return err
	}
	if len(certManager) == 0 {
		return errors.New("no cert-manager CRDs in render/testdata/cert-manager-crds")
	}
	// The operator's first, under its own field manager, as its install
	// would: keyhole's, applied after, must leave them as they are.
	if _, _, err := c.kubectl(ctx, nil, "apply", "--server-side", "--field-manager=omnia-operator", "--validate=strict", "-f", operatorCRDs); err != nil {
		return err
	}
	var files []string
	for _, f := range append([]string{keyholeCRDs}, certManager...) {
		files = append(files, "-f", f)
	}
	if _, _, err := c.kubectl(ctx, nil, append([]string{"apply", "--server-side", "--field-manager=keyhole-e2e", "--validate=strict"}, files...)...); err != nil {
		return err
	}
	_, _, err = c.kubectl(ctx, nil, append([]string{"wait", "--for=condition=Established", "--timeout=60s", "-f", operatorCRDs}, files...)...)
	return err
}
