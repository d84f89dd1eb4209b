//go:build e2e

// Package cluster runs what keyhole renders on a real single-node
// Kubernetes cluster: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, kube-proxy, containerd and a kubelet, all started by the
// test in private network, mount and PID namespaces, with images the
// repository builds itself (scripts/images.sh, scripts/cluster-images.sh)
// imported into containerd. Leaving the namespaces ends every process and
// removes every bridge, iptables rule and mount the cluster made; the one
// machine-wide thing, the cgroups the kubelet makes under its own
// cgroupRoot, is removed by the test afterwards and swept on the next run
// if a killed run left it. It runs only with the e2e build tag, as root;
// a missing tool fails it with the fix. See docs/e2e.md.
package cluster
