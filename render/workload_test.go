package render

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// workloadInput binds an S3 Connection of the proxy's own AWS identity
// (IRSA's role) and a Google one (GKE's service account) to a sandbox.
const workloadInput = `apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: aws, namespace: ns}
spec:
  hosts: [s3.us-east-1.amazonaws.com]
  credential:
    kind: awsSigV4
    awsSigV4: {identity: workload, roleArn: "arn:aws:iam::111122223333:role/agent-s3"}
  placement:
    inject:
      - hosts: [s3.us-east-1.amazonaws.com]
        placeholderEnv: [AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY]
        rules: [{methods: [GET, PUT], pathPrefixes: [/reports]}]
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: gcs, namespace: ns}
spec:
  hosts: [storage.googleapis.com]
  credential:
    kind: googleServiceAccount
    googleServiceAccount:
      identity: workload
      serviceAccount: agent-gcs@acme-prod.iam.gserviceaccount.com
      scopes: [https://www.googleapis.com/auth/devstorage.read_only]
  placement:
    inject:
      - hosts: [storage.googleapis.com]
        rules: [{methods: [GET], pathPrefixes: [/storage/v1/b/reports]}]
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: SandboxClass
metadata: {name: ws, namespace: ns}
spec:
  image: ghcr.io/a/b:1
  connections: [{role: s3}, {role: gcs}]
---
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: AgentRuntime
metadata: {name: support, namespace: ns}
spec:
  promptPackRef: {name: s}
  facades: [{type: websocket, port: 8080}]
  sandbox:
    enabled: true
    connections:
    - {sandbox: ws, role: s3, connection: aws}
    - {sandbox: ws, role: gcs, connection: gcs}
`

// TestRenderWorkloadIdentity renders Connections of the proxy's own
// identity: in a pod of its own, the proxy's ServiceAccount carries the
// role and the service account they name, proxy.json names no Secret
// for them and the pod mounts none; as a sidecar, render refuses, since
// the sandbox's containers would share the pod's identity.
func TestRenderWorkloadIdentity(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.yaml"), []byte(workloadInput), 0o644); err != nil {
		t.Fatal(err)
	}
	plan := compileDir(t, dir)
	files, err := Render(plan, Options{ProxyMode: ModeDeployment})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, f := range files {
		byName[filepath.Base(f.Path)] = string(f.Data)
	}
	sa := byName["serviceaccount-support-ws-egress-proxy.yaml"]
	for _, want := range []string{
		"  annotations:\n    eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/agent-s3\n    iam.gke.io/gcp-service-account: agent-gcs@acme-prod.iam.gserviceaccount.com\n",
	} {
		if !strings.Contains(sa, want) {
			t.Errorf("the proxy's ServiceAccount lacks %q:\n%s", want, sa)
		}
	}
	pj := byName["proxy.json"]
	if !strings.Contains(pj, `"identity": "workload"`) || strings.Contains(pj, `"secret"`) {
		t.Errorf("proxy.json:\n%s", pj)
	}
	if d := byName["deployment-support-ws-egress-proxy.yaml"]; d == "" || strings.Contains(d, "egress-secret") {
		t.Errorf("the proxy's Deployment mounts a Secret, or is missing:\n%s", d)
	}
	if _, err := Render(plan, Options{ProxyMode: ModeSidecar}); !errors.Is(err, ErrInvalidPlan) || !strings.Contains(err.Error(), "identity workload") {
		t.Errorf("sidecar render: %v, want ErrInvalidPlan naming the workload identity", err)
	}
}
