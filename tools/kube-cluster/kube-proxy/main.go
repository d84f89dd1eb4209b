// Command kube-proxy is upstream's kube-proxy, built from the Go module
// proxy for keyhole's real-cluster end-to-end test: pods reach the API
// server and the proxy's Service through their cluster IPs. It runs as
// k8s.io/kubernetes cmd/kube-proxy/proxy.go does (k8scmd).
package main

import (
	"k8s.io/kubernetes/cmd/kube-proxy/app"

	"keyhole.dev/keyhole/tools/kube-cluster/internal/k8scmd"
)

func main() {
	k8scmd.Run(app.NewProxyCommand())
}
