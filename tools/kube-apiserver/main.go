// Command kube-apiserver is upstream's kube-apiserver, built from the Go
// module proxy so that keyhole's end-to-end test can check every rendered
// object against a real API server. It mirrors k8s.io/kubernetes
// cmd/kube-apiserver/apiserver.go line for line: the blank imports register
// the same log formats, metrics and time zone data the release binary has.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // for JSON log format registration
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // load all the prometheus client-go plugins
	_ "k8s.io/component-base/metrics/prometheus/version"  // for version metric registration
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	command := app.NewAPIServerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
