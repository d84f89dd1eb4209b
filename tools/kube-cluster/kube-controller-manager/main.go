// Command kube-controller-manager is upstream's controller manager, built
// from the Go module proxy for keyhole's real-cluster end-to-end test (the
// rendered Deployments need its ReplicaSet controller). It runs as
// k8s.io/kubernetes cmd/kube-controller-manager/controller-manager.go does
// (k8scmd), with the time zone data that main adds.
package main

import (
	_ "time/tzdata" // for CronJob Time Zone support

	"k8s.io/kubernetes/cmd/kube-controller-manager/app"

	"keyhole.dev/keyhole/tools/kube-cluster/internal/k8scmd"
)

func main() {
	k8scmd.Run(app.NewControllerManagerCommand())
}
