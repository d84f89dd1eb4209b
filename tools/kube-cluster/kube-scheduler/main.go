// Command kube-scheduler is upstream's scheduler, built from the Go module
// proxy for keyhole's real-cluster end-to-end test. It runs as
// k8s.io/kubernetes cmd/kube-scheduler/scheduler.go does (k8scmd).
package main

import (
	"k8s.io/kubernetes/cmd/kube-scheduler/app"

	"keyhole.dev/keyhole/tools/kube-cluster/internal/k8scmd"
)

func main() {
	k8scmd.Run(app.NewSchedulerCommand())
}
