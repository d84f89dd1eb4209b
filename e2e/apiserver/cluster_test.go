//go:build e2e

package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/e2ekube"
	"keyhole.dev/keyhole/internal/testpki"
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
	procs      []*e2ekube.Proc // started in order, stopped in reverse
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
		if !errors.Is(lastErr, e2ekube.ErrPortTaken) {
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
	if err := e2ekube.WaitReady(ctx, etcd, etcdReadyTimeout, 40, func(ctx context.Context) bool {
		return e2ekube.Get(ctx, http.DefaultClient, clientURL+"/health", "") == http.StatusOK
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
	if err := e2ekube.WaitReady(ctx, apiserver, apiserverReadyTimeout, 40, func(ctx context.Context) bool {
		return e2ekube.Get(ctx, client, server+"/readyz", p.token) == http.StatusOK
	}); err != nil {
		return err
	}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	return e2ekube.WriteKubeconfig(c.kubeconfig, server, "keyhole-e2e-admin", p.token, p.caPEM)
}

// start runs a server with its output in a log file under c.dir.
func (c *cluster) start(name, bin, logName string, args ...string) (*e2ekube.Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.dir
	cmd.SysProcAttr = procAttr()
	p, err := e2ekube.Start(name, filepath.Join(c.dir, logName), cmd)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
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
		c.procs[i].Stop(stopTimeout)
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
	if err := ca.WriteLeaf(p.certFile, p.keyFile, "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "10.0.0.1"); err != nil {
		return p, err
	}
	if err := e2ekube.WriteServiceAccountKey(p.saKeyFile, p.saPubFile); err != nil {
		return p, err
	}
	if p.token, err = e2ekube.RandomToken(); err != nil {
		return p, err
	}
	// token,user,uid,"groups": system:masters is allowed everything by
	// the RBAC bootstrap policy.
	line := p.token + `,keyhole-e2e-admin,keyhole-e2e-admin,"system:masters"` + "\n"
	return p, os.WriteFile(p.tokenFile, []byte(line), 0o600)
}

// kubectl runs the machine's kubectl against the cluster, with its own
// HOME so its discovery cache is fresh per run and never the user's.
func (c *cluster) kubectl(ctx context.Context, stdin []byte, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	k := e2ekube.Kubectl{Bin: c.kubectlBin, Kubeconfig: c.kubeconfig, Home: filepath.Join(c.dir, "home"), Dir: c.dir}
	return k.Run(ctx, stdin, args...)
}

// installCRDs installs, as a cluster running the omnia operator has them,
// the operator's own CRDs for AgentRuntime and ToolRegistry (the release
// keyhole carries, schema.OperatorCRDs), then keyhole's (schema.CRDs, what
// `keyhole schema --crds` prints: Connection and SandboxClass) next to
// them, agent-sandbox's (schema.AgentSandboxCRDs, as published), and
// cert-manager's (the pinned copies the render tests validate
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
	agentSandbox, err := schema.AgentSandboxCRDs()
	if err != nil {
		return err
	}
	agentSandboxCRDs := filepath.Join(c.dir, "agent-sandbox-crds.yaml")
	if err := os.WriteFile(agentSandboxCRDs, agentSandbox, 0o600); err != nil {
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
	// agent-sandbox's, as its own install (k8s/crds) would.
	if _, _, err := c.kubectl(ctx, nil, "apply", "--server-side", "--field-manager=agent-sandbox", "--validate=strict", "-f", agentSandboxCRDs); err != nil {
		return err
	}
	var files []string
	for _, f := range append([]string{keyholeCRDs}, certManager...) {
		files = append(files, "-f", f)
	}
	if _, _, err := c.kubectl(ctx, nil, append([]string{"apply", "--server-side", "--field-manager=keyhole-e2e", "--validate=strict"}, files...)...); err != nil {
		return err
	}
	_, _, err = c.kubectl(ctx, nil, append([]string{"wait", "--for=condition=Established", "--timeout=60s", "-f", operatorCRDs, "-f", agentSandboxCRDs}, files...)...)
	return err
}
