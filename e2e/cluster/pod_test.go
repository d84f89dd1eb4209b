//go:build e2e

package cluster

import (
	"context"
	"strings"
	"testing"

	"keyhole.dev/keyhole/render"
)

// podTimeout bounds one pod's run; a cold start of a container on a busy
// 2-core machine takes seconds.
const podTimeout = "180s"

// TestProjectImagesRun runs pods from the images the repository builds:
// the release proxy image (its --version, as the non-root user the image
// names, with a read-only root filesystem) and the test's sandbox image,
// which must reach the API server through the kubernetes Service by its
// DNS name, with the token and CA the kubelet mounts.
func TestProjectImagesRun(t *testing.T) {
	ctx := context.Background()
	c := the
	ns := "images"
	if _, err := c.kubectl(ctx, nil, "create", "namespace", ns); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		pod  string
		want []string // substrings of the pod's log
	}{
		"proxy image": {
			pod: `apiVersion: v1
kind: Pod
metadata: {name: proxy-version, namespace: images}
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  securityContext: {runAsNonRoot: true, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: proxy
    image: ` + render.DefaultProxyImage + `
    imagePullPolicy: Never
    args: [--version]
    securityContext: {readOnlyRootFilesystem: true, allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`,
			want: []string{"keyhole-proxy"},
		},
		"sandbox image reaches the API server": {
			pod: `apiVersion: v1
kind: Pod
metadata: {name: sandbox-tools, namespace: images}
spec:
  restartPolicy: Never
  containers:
  - name: sandbox
    image: ` + sandboxImage + `
    imagePullPolicy: Never
    command: [/bin/sh, -ec]
    args:
    - |
      git --version
      python3 -c 'import requests; print("requests", requests.__version__)'
      sa=/var/run/secrets/kubernetes.io/serviceaccount
      curl -sS --fail --cacert $sa/ca.crt -H "Authorization: Bearer $(cat $sa/token)" https://kubernetes.default.svc/version
`,
			want: []string{"git version", "requests ", `"gitVersion": "v1.37.2"`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := c.kubectl(ctx, []byte(tc.pod), "apply", "-f", "-"); err != nil {
				t.Fatal(err)
			}
			podName := between(tc.pod, "name: ", ",")
			if _, err := c.kubectl(ctx, nil, "wait", "-n", ns, "--for=jsonpath={.status.phase}=Succeeded", "pod/"+podName, "--timeout="+podTimeout); err != nil {
				desc, _ := c.kubectl(ctx, nil, "describe", "-n", ns, "pod/"+podName)
				logs, _ := c.kubectl(ctx, nil, "logs", "-n", ns, "pod/"+podName)
				t.Fatalf("%v\n%s\nlogs:\n%s", err, desc, logs)
			}
			logs, err := c.kubectl(ctx, nil, "logs", "-n", ns, "pod/"+podName)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(logs, w) {
					t.Errorf("log lacks %q:\n%s", w, logs)
				}
			}
		})
	}
}

// between returns the text of s after the first from and before the next to.
func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return v
}
