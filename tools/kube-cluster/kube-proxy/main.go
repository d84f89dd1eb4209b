// Command kube-proxy is upstream's kube-proxy, built from the Go module
// proxy for keyhole's real-cluster end-to-end test: pods reach the API
// server and the proxy's Service through their cluster IPs. It mirrors
// k8s.io/kubernetes cmd/kube-proxy/proxy.go.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // for client metric registration
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	command := app.NewProxyCommand()
	code := cli.Run(command)
	os.Exit(code)
}
