// Command kubelet is upstream's kubelet, built from the Go module proxy so
// that keyhole's real-cluster end-to-end test runs pods. It runs as
// k8s.io/kubernetes cmd/kubelet/kubelet.go does (k8scmd).
package main

import (
	"context"

	"k8s.io/kubernetes/cmd/kubelet/app"

	"keyhole.dev/keyhole/tools/kube-cluster/internal/k8scmd"
)

func main() {
	k8scmd.Run(app.NewKubeletCommand(context.Background()))
}
