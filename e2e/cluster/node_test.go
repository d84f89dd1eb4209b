//go:build e2e

package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"keyhole.dev/keyhole/internal/e2ekube"
)

// The cluster's network lives only in the run's network namespace, so the
// names and addresses are fixed: nothing else can see them.
const (
	nodeName     = "keyhole-e2e"
	bridgeName   = "kh0"
	metadataLink = "kh-meta"   // the node's interface holding metadataIP
	nodeIP       = "10.88.0.1" // the bridge: pods' gateway, the node's and API server's address
	podSubnet    = "10.88.0.0/24"
	serviceCIDR  = "10.96.0.0/24"
	apiService   = "10.96.0.1" // the kubernetes Service
	apiPort      = "6443"
	dnsDomain    = "cluster.local"
)

// Bounds that only stop a broken run from hanging; a healthy start on a
// busy 2-core machine takes about a minute.
const (
	readyTimeout   = 4 * time.Minute
	kubectlTimeout = 2 * time.Minute
	stopTimeout    = 10 * time.Second
)

// cluster is the running single-node cluster, seen from inside its
// namespaces.
type cluster struct {
	dir        string // state: certificates, data, logs, configs
	tools      tools
	pki        pki
	kubeconfig string // the admin's
	socket     string // containerd's
	procs      []*e2ekube.Proc
	dns        *dnsServer
	// certManager is cert-manager's controller, once a test has started
	// it (startCertManager).
	certManager *e2ekube.Proc
}

// innerMain runs as a child of the namespaces' init: it starts the
// cluster, runs the tests and stops the servers. Whatever it leaves is
// ended with the namespaces.
func innerMain(m *testing.M, dir string) int {
	t, err := readTools(os.Getenv(envTools))
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e/cluster: %v\n", err)
		return 1
	}
	c := &cluster{dir: dir, tools: t}
	defer c.stop()
	start := time.Now()
	if err := c.start(context.Background(), os.Getenv(envCgroup)); err != nil {
		fmt.Fprintf(os.Stderr, "e2e/cluster: starting the cluster: %v\n", err)
		c.dumpLogs(os.Stderr)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e/cluster: cluster up in %s\n", time.Since(start).Round(time.Second))
	the = c
	code := m.Run()
	if code != 0 {
		c.dumpLogs(os.Stderr)
	}
	return code
}

func (c *cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.dir}, elem...)...)
}

func (c *cluster) start(ctx context.Context, cgroupRoot string) error {
	for _, d := range []string{"logs", "etcd", "pki", "containerd", "cni/net.d", "cni/ipam", "kubelet", "pod-logs", "home", "sysctl"} {
		if err := os.MkdirAll(c.path(d), 0o700); err != nil {
			return err
		}
	}
	if err := c.setupNamespaces(); err != nil {
		return fmt.Errorf("setting up the namespaces: %w", err)
	}
	p, err := writePKI(c.path("pki"))
	if err != nil {
		return fmt.Errorf("generating certificates: %w", err)
	}
	c.pki = p
	if err := c.startControlPlane(ctx); err != nil {
		return err
	}
	if err := c.startContainerd(ctx); err != nil {
		return err
	}
	if err := c.importImages(ctx); err != nil {
		return err
	}
	if c.dns, err = startDNS(nodeIP+":53", c); err != nil {
		return fmt.Errorf("starting the cluster DNS: %w", err)
	}
	if err := c.startNode(ctx, cgroupRoot); err != nil {
		return err
	}
	if err := c.waitUsable(ctx); err != nil {
		return err
	}
	return c.startPolicyController(ctx)
}

// setupNamespaces prepares the new namespaces: loopback up, a bridge for
// the pods with the node's address, a private /run (containerd's, runc's
// and CNI's state, network namespace files), and the kernel settings the
// kubelet insists on writing (kernel.panic and the like, which are not
// per namespace) bind-mounted over with private files, so the machine's
// values are never touched. Everything here ends with the namespaces.
func (c *cluster) setupNamespaces() error {
	ip := c.tools[toolIP]
	steps := [][]string{
		{ip, "link", "set", "lo", "up"},
		{ip, "link", "add", bridgeName, "type", "bridge"},
		{ip, "addr", "add", nodeIP + "/24", "dev", bridgeName},
		{ip, "link", "set", bridgeName, "up"},
		// The cloud metadata address, a stand-in held by the node on
		// an interface of its own, so a pod's attempt to reach it is
		// seen. A veth pair, since this kernel has no dummy interfaces.
		{ip, "link", "add", metadataLink, "type", "veth", "peer", "name", metadataLink + "-peer"},
		{ip, "addr", "add", metadataIP + "/32", "dev", metadataLink},
		{ip, "link", "set", metadataLink, "up"},
		{ip, "link", "set", metadataLink + "-peer", "up"},
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	if err := syscall.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755,size=256m"); err != nil {
		return fmt.Errorf("mounting a private /run: %w", err)
	}
	// Pods reach each other through a Service only when bridged traffic
	// passes iptables; per namespace since Linux 5.3.
	for _, s := range []string{"net/bridge/bridge-nf-call-iptables", "net/ipv4/ip_forward"} {
		if err := os.WriteFile("/proc/sys/"+s, []byte("1"), 0o644); err != nil {
			return fmt.Errorf("setting %s in the cluster's network namespace: %w", s, err)
		}
	}
	for _, s := range []string{
		"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	} {
		cur, err := os.ReadFile("/proc/sys/" + s)
		if err != nil {
			return err
		}
		fake := c.path("sysctl", strings.ReplaceAll(s, "/", "."))
		if err := os.WriteFile(fake, cur, 0o644); err != nil {
			return err
		}
		if err := syscall.Mount(fake, "/proc/sys/"+s, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind-mounting a private %s: %w", s, err)
		}
	}
	return nil
}

func (c *cluster) startControlPlane(ctx context.Context) error {
	etcd, err := c.run("etcd", c.tools[toolEtcd],
		"--name=keyhole-e2e",
		"--data-dir="+c.path("etcd"),
		"--listen-client-urls=http://127.0.0.1:2379",
		"--advertise-client-urls=http://127.0.0.1:2379",
		"--listen-peer-urls=http://127.0.0.1:2380",
		"--initial-advertise-peer-urls=http://127.0.0.1:2380",
		"--initial-cluster=keyhole-e2e=http://127.0.0.1:2380",
		"--unsafe-no-fsync",
	)
	if err != nil {
		return err
	}
	if err := e2ekube.WaitReady(ctx, etcd, readyTimeout, 60, func(ctx context.Context) bool {
		return e2ekube.Get(ctx, http.DefaultClient, "http://127.0.0.1:2379/health", "") == http.StatusOK
	}); err != nil {
		return err
	}
	p := c.pki
	api, err := c.run("kube-apiserver", c.tools[toolAPIServer],
		"--etcd-servers=http://127.0.0.1:2379",
		"--bind-address=0.0.0.0",
		"--advertise-address="+nodeIP,
		"--secure-port="+apiPort,
		"--cert-dir="+c.path("pki", "apiserver"),
		"--tls-cert-file="+p.certFile,
		"--tls-private-key-file="+p.keyFile,
		"--client-ca-file="+p.caFile,
		"--token-auth-file="+p.tokenFile,
		"--anonymous-auth=false",
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--service-account-issuer=https://kubernetes.default.svc."+dnsDomain,
		"--service-account-key-file="+p.saPubFile,
		"--service-account-signing-key-file="+p.saKeyFile,
		"--service-cluster-ip-range="+serviceCIDR,
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate="+p.kubeletClientCert,
		"--kubelet-client-key="+p.kubeletClientKey,
		"--allow-privileged=false",
		"--profiling=false",
	)
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.caPEM)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	defer client.CloseIdleConnections()
	if err := e2ekube.WaitReady(ctx, api, readyTimeout, 60, func(ctx context.Context) bool {
		return e2ekube.Get(ctx, client, "https://127.0.0.1:"+apiPort+"/readyz", p.adminToken) == http.StatusOK
	}); err != nil {
		return err
	}
	server := "https://127.0.0.1:" + apiPort
	c.kubeconfig = c.path("admin.kubeconfig")
	for _, kc := range []struct{ file, user, token string }{
		{c.kubeconfig, "admin", p.adminToken},
		{c.path("kubelet.kubeconfig"), "system:node:" + nodeName, p.kubeletToken},
	} {
		if err := e2ekube.WriteKubeconfig(kc.file, server, kc.user, kc.token, p.caPEM); err != nil {
			return err
		}
	}
	// The controller manager and the scheduler run as the admin: this
	// cluster tests what runs on it, not its control plane's RBAC.
	if _, err := c.run("kube-controller-manager", c.tools[toolKCM],
		"--kubeconfig="+c.kubeconfig,
		"--authentication-kubeconfig="+c.kubeconfig,
		"--authorization-kubeconfig="+c.kubeconfig,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--root-ca-file="+p.caFile,
		"--service-account-private-key-file="+p.saKeyFile,
		"--service-cluster-ip-range="+serviceCIDR,
		"--allocate-node-cidrs=false",
		"--profiling=false",
	); err != nil {
		return err
	}
	if _, err := c.run("kube-scheduler", c.tools[toolScheduler],
		"--kubeconfig="+c.kubeconfig,
		"--authentication-kubeconfig="+c.kubeconfig,
		"--authorization-kubeconfig="+c.kubeconfig,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
		"--profiling=false",
	); err != nil {
		return err
	}
	return nil
}

// startContainerd runs containerd with every directory and socket its
// own. restrict_oom_score_adj: the machine may not grant
// CAP_SYS_RESOURCE, and runc fails to start a container whose OOM score it
// cannot lower ("can't get final child's PID from pipe").
func (c *cluster) startContainerd(ctx context.Context) error {
	c.socket = c.path("containerd", "containerd.sock")
	cniConf := `{
  "cniVersion": "1.0.0",
  "name": "keyhole-e2e",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + bridgeName + `",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "` + c.path("cni", "ipam") + `",
        "ranges": [[{"subnet": "` + podSubnet + `", "gateway": "` + nodeIP + `", "rangeStart": "10.88.0.10"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`
	if err := os.WriteFile(c.path("cni", "net.d", "10-keyhole-e2e.conflist"), []byte(cniConf), 0o600); err != nil {
		return err
	}
	config := `version = 2
root = "` + c.path("containerd", "root") + `"
state = "/run/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "` + c.socket + `"

[ttrpc]
  address = "` + c.socket + `.ttrpc"

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = "` + c.path("containerd", "opt") + `"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + pauseImage + `"
  restrict_oom_score_adj = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "` + c.tools[toolRunc] + `"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "` + c.tools[toolCNI] + `"
    conf_dir = "` + c.path("cni", "net.d") + `"
    max_conf_num = 1
`
	cfg := c.path("containerd", "config.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return err
	}
	p, err := c.run("containerd", c.tools[toolContainer], "--config="+cfg)
	if err != nil {
		return err
	}
	return e2ekube.WaitReady(ctx, p, readyTimeout, 60, func(ctx context.Context) bool {
		_, err := c.ctr(ctx, "version")
		return err == nil
	})
}

// ctr runs containerd's client against this cluster's containerd, in the
// namespace the kubelet's pods live in.
func (c *cluster) ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.tools[toolCtr], append([]string{"--address", c.socket, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Names the test's own images are imported under; scripts/cluster-images.sh
// tags them so.
const (
	pauseImage   = "keyhole.dev/e2e/pause:1"
	sandboxImage = "keyhole.dev/e2e/sandbox:bookworm"
)

// importImages imports the repository-built images; no image is ever
// pulled, since this machine reaches no registry.
func (c *cluster) importImages(ctx context.Context) error {
	for _, k := range []string{imgPause, imgProxy, imgNetInit, imgKeyhole, imgSandbox} {
		if _, err := c.ctr(ctx, "images", "import", "--no-unpack=false", c.tools[k]); err != nil {
			return fmt.Errorf("importing %s: %w", c.tools[k], err)
		}
	}
	return nil
}

// startNode starts kube-proxy and the kubelet.
func (c *cluster) startNode(ctx context.Context, cgroupRoot string) error {
	proxyConfig := `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: ` + c.kubeconfig + `
mode: iptables
hostnameOverride: ` + nodeName + `
bindAddress: 0.0.0.0
clusterCIDR: ` + podSubnet + `
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
iptables:
  masqueradeAll: true
# Leave the conntrack table's machine-wide sizes alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`
	if err := os.WriteFile(c.path("kube-proxy.yaml"), []byte(proxyConfig), 0o600); err != nil {
		return err
	}
	if _, err := c.run("kube-proxy", c.tools[toolKubeProxy], "--config="+c.path("kube-proxy.yaml")); err != nil {
		return err
	}
	if err := os.WriteFile(c.path("resolv.conf"), []byte("nameserver "+nodeIP+"\n"), 0o644); err != nil {
		return err
	}
	kubeletConfig := `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The machine is on cgroup v1.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /` + cgroupRoot + `
# The machine may not grant CAP_SYS_RESOURCE; containerd restricts OOM
# scores to the kubelet's own.
oomScoreAdj: 0
failSwapOn: false
containerRuntimeEndpoint: unix://` + c.socket + `
address: ` + nodeIP + `
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
# As a real cluster's kubelet: every caller authenticated (the API
# server by its client certificate, others by a token the API server
# reviews) and authorized by the API server. A pod can reach this port;
# an anonymous caller gets 401.
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: ` + c.pki.caFile + `
authorization:
  mode: Webhook
clusterDNS: [` + nodeIP + `]
clusterDomain: ` + dnsDomain + `
resolvConf: ` + c.path("resolv.conf") + `
podLogsDir: ` + c.path("pod-logs") + `
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: "1%"
  nodefs.inodesFree: "1%"
  imagefs.available: "1%"
syncFrequency: 5s
fileCheckFrequency: 5s
`
	if err := os.WriteFile(c.path("kubelet.yaml"), []byte(kubeletConfig), 0o600); err != nil {
		return err
	}
	_, err := c.run("kubelet", c.tools[toolKubelet],
		"--config="+c.path("kubelet.yaml"),
		"--kubeconfig="+c.path("kubelet.kubeconfig"),
		"--root-dir="+c.path("kubelet"),
		"--hostname-override="+nodeName,
		"--node-ip="+nodeIP,
		"--v=1",
	)
	return err
}

// waitUsable waits until the node is Ready, the default ServiceAccount
// exists and the kubernetes Service has its endpoint: what a pod needs.
func (c *cluster) waitUsable(ctx context.Context) error {
	deadline := time.Now().Add(readyTimeout)
	var last error
	for time.Now().Before(deadline) {
		last = nil
		if _, err := c.kubectl(ctx, nil, "wait", "--for=condition=Ready", "node/"+nodeName, "--timeout=10s"); err != nil {
			last = err
		} else if _, err := c.kubectl(ctx, nil, "get", "serviceaccount", "default", "-n", "default"); err != nil {
			last = err
		} else {
			return nil
		}
		for _, p := range c.procs {
			select {
			case <-p.Exited():
				return fmt.Errorf("%s exited (%v); the end of its log:\n%s", p.Name, p.Err(), e2ekube.Tail(p.Log, 60))
			default:
			}
		}
		time.Sleep(2 * time.Second)
	}
	return fmt.Errorf("the node was not usable within %s: %w", readyTimeout, last)
}

// run starts a server with its output in logs/NAME.log.
func (c *cluster) run(name, bin string, args ...string) (*e2ekube.Proc, error) {
	return c.runEnv(name, nil, bin, args...)
}

// runEnv is run with variables added to the server's environment.
func (c *cluster) runEnv(name string, env []string, bin string, args ...string) (*e2ekube.Proc, error) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.dir
	cmd.Env = append(append(e2ekube.WithoutKubeEnv(os.Environ(), envPrefix), "HOME="+c.path("home")), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p, err := e2ekube.Start(name, c.path("logs", name+".log"), cmd)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

// stop ends the servers, newest first. Containers and shims end with the
// PID namespace.
func (c *cluster) stop() {
	if c.dns != nil {
		c.dns.close()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop(stopTimeout)
	}
	c.procs = nil
}

// dumpLogs prints the end of every server's log, for a failed run.
func (c *cluster) dumpLogs(w *os.File) {
	for _, p := range c.procs {
		fmt.Fprintf(w, "---- the end of %s's log ----\n%s\n", p.Name, e2ekube.Tail(p.Log, 30))
	}
}

// kubectl runs kubectl as the admin, with its own HOME.
func (c *cluster) kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
	defer cancel()
	k := e2ekube.Kubectl{Bin: c.tools[toolKubectl], Kubeconfig: c.kubeconfig, Home: c.path("home"), DropEnv: []string{envPrefix}}
	out, _, err := k.Run(ctx, stdin, args...)
	return out, err
}
