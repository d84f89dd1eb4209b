//go:build e2e

package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// tools are the programs and image tarballs the cluster runs, located by
// the outer process (which may build them) and read by the inner one.
type tools map[string]string

// Keys of tools.
const (
	toolAPIServer  = "kube-apiserver"
	toolKubelet    = "kubelet"
	toolKCM        = "kube-controller-manager"
	toolScheduler  = "kube-scheduler"
	toolKubeProxy  = "kube-proxy"
	toolSourceCtl  = "source-controller"
	toolKustomCtl  = "kustomize-controller"
	toolKubeRouter = "kube-router"
	toolCertMgr    = "cert-manager-controller"
	toolEtcd       = "etcd"
	toolContainer  = "containerd"
	toolShim       = "containerd-shim-runc-v2"
	toolRunc       = "runc"
	toolCtr        = "ctr"
	toolIptables   = "iptables"
	toolIP         = "ip"
	toolKubectl    = "kubectl"
	toolCNI        = "cni-bin-dir"
	imgProxy       = "image:keyhole-proxy"
	imgNetInit     = "image:keyhole-netinit"
	imgKeyhole     = "image:keyhole"
	imgPause       = "image:pause"
	imgSandbox     = "image:sandbox"
	repoRoot       = "repo"
)

func (t tools) encode() []byte {
	var b bytes.Buffer
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, t[k])
	}
	return b.Bytes()
}

func readTools(path string) (tools, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	t := tools{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "=")
		if ok {
			t[k] = v
		}
	}
	return t, sc.Err()
}

// depsFix is what to run when a Debian package's program is missing.
const depsFix = "run scripts/cluster-deps.sh (it installs containerd, runc, containernetworking-plugins, iptables, ipset and etcd-server without starting their services)"

// locateTools finds the machine's programs and runs the repository's
// build scripts, which print at once what is current and build what is
// not: kube-apiserver (or $KEYHOLE_KUBE_APISERVER), the node and
// control-plane binaries, Flux's controllers, kube-router, cert-manager's
// controller, the release
// images and the test's own images.
func locateTools() (tools, error) {
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(repo, "scripts", "kube-cluster.sh")); err != nil {
		return nil, fmt.Errorf("cannot find the repository root from the test's directory: %w", err)
	}
	t := tools{repoRoot: repo}
	for _, name := range []string{toolEtcd, toolContainer, toolShim, toolRunc, toolCtr, toolIptables, toolIP, "ipset", "unshare"} {
		p, err := exec.LookPath(name)
		if err != nil {
			return nil, fmt.Errorf("%s is not installed: %s", name, depsFix)
		}
		t[name] = p
	}
	for _, dir := range []string{"/usr/lib/cni", "/opt/cni/bin"} {
		if _, err := os.Stat(filepath.Join(dir, "bridge")); err == nil {
			t[toolCNI] = dir
			break
		}
	}
	if t[toolCNI] == "" {
		return nil, fmt.Errorf("the CNI bridge plugin is not installed: %s", depsFix)
	}
	if p := "/usr/bin/kubectl"; isExec(p) {
		t[toolKubectl] = p
	} else if p, err := exec.LookPath("kubectl"); err == nil {
		t[toolKubectl] = p
	} else {
		return nil, fmt.Errorf("kubectl is not installed: run scripts/test-deps.sh")
	}

	if p := os.Getenv("KEYHOLE_KUBE_APISERVER"); p != "" {
		if !isExec(p) {
			return nil, fmt.Errorf("KEYHOLE_KUBE_APISERVER=%s is not an executable file (unset it to let scripts/kube-apiserver.sh build one)", p)
		}
		t[toolAPIServer] = p
	} else {
		out, err := script(repo, "kube-apiserver.sh")
		if err != nil {
			return nil, err
		}
		t[toolAPIServer] = out[len(out)-1]
	}
	out, err := script(repo, "kube-cluster.sh")
	if err != nil {
		return nil, err
	}
	for _, name := range []string{toolKubelet, toolKCM, toolScheduler, toolKubeProxy} {
		t[name] = filepath.Join(out[len(out)-1], name)
	}
	if out, err = script(repo, "flux.sh"); err != nil {
		return nil, err
	}
	for _, name := range []string{toolSourceCtl, toolKustomCtl} {
		t[name] = filepath.Join(out[len(out)-1], name)
	}
	if out, err = script(repo, "kube-router.sh"); err != nil {
		return nil, err
	}
	t[toolKubeRouter] = filepath.Join(out[len(out)-1], toolKubeRouter)
	if out, err = script(repo, "cert-manager.sh"); err != nil {
		return nil, err
	}
	t[toolCertMgr] = filepath.Join(out[len(out)-1], toolCertMgr)
	if out, err = script(repo, "images.sh"); err != nil {
		return nil, err
	}
	for _, p := range out {
		t["image:"+strings.TrimSuffix(filepath.Base(p), ".tar")] = p
	}
	if out, err = script(repo, "cluster-images.sh"); err != nil {
		return nil, err
	}
	for _, p := range out {
		t["image:"+strings.TrimSuffix(filepath.Base(p), ".tar")] = p
	}
	for _, k := range []string{toolAPIServer, toolKubelet, toolKCM, toolScheduler, toolKubeProxy, toolSourceCtl, toolKustomCtl, toolKubeRouter, toolCertMgr, imgProxy, imgNetInit, imgKeyhole, imgPause, imgSandbox} {
		if _, err := os.Stat(t[k]); err != nil {
			return nil, fmt.Errorf("%s: the build scripts did not leave it at %q: %w", k, t[k], err)
		}
	}
	return t, nil
}

// script runs scripts/NAME from the repository root and returns the lines
// it printed on stdout; its progress goes to stderr.
func script(repo, name string) ([]string, error) {
	cmd := exec.Command(filepath.Join(repo, "scripts", name))
	cmd.Dir = repo
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("scripts/%s failed (%w); run it by hand to see why", name, err)
	}
	lines := strings.Fields(string(out))
	if len(lines) == 0 {
		return nil, fmt.Errorf("scripts/%s printed nothing", name)
	}
	return lines, nil
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}
