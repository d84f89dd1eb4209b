//go:build e2e

package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// checkCARenewal renews the sandbox CA as cert-manager does, by replacing
// <claim>-egress-ca with a new key and certificate, and follows it to the
// sandbox without restarting anything: egress-trust-watch publishes a
// bundle holding the new CA beside the previous one, the sandbox's trust
// directory gets it (the emptyDir as a sidecar, the ConfigMap volume as a
// Deployment), the proxy logs that the previous CA goes on signing until
// its switch delay ends, and requests keep working throughout.
func (c *cluster) checkCARenewal(t *testing.T, ctx context.Context, mode string) {
	before := c.proxyPod(t, ctx, mode)
	if out, err := c.sandboxSh(ctx, `cat /etc/keyhole/trust/php-keyhole.ini; echo "PHP_INI_SCAN_DIR=$PHP_INI_SCAN_DIR"`); err != nil ||
		!strings.Contains(out, `curl.cainfo = "/etc/keyhole/trust/bundle.pem"`) || !strings.Contains(out, "PHP_INI_SCAN_DIR=:/etc/keyhole/trust") {
		t.Errorf("the sandbox's PHP ini file and scan directory: %q, %v", out, err)
	}
	b64, err := c.kubectl(ctx, nil, "get", "secret", acmeCASecret, "-n", acmeNS, "-o", "jsonpath={.data.ca\\.crt}")
	if err != nil {
		t.Fatal(err)
	}
	previous, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := sandboxCA(acmeCASecret)
	if err != nil {
		t.Fatal(err)
	}
	secret := fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata: {name: %s, namespace: %s}
type: kubernetes.io/tls
data:
  ca.crt: %s
  tls.crt: %s
  tls.key: %s
`, acmeCASecret, acmeNS, base64.StdEncoding.EncodeToString(cert), base64.StdEncoding.EncodeToString(cert), base64.StdEncoding.EncodeToString(key))
	if _, err := c.kubectl(ctx, []byte(secret), "apply", "--server-side", "--field-manager=keyhole-e2e-setup", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	renewedAt := time.Now()
	holdsBoth := func(bundle string) bool {
		return strings.Contains(bundle, string(previous)) && strings.HasSuffix(bundle, string(cert))
	}
	deadline := renewedAt.Add(4 * time.Minute)
	for {
		published, _ := c.kubectl(ctx, nil, "get", "configmap", acmeTrust, "-n", acmeNS, "-o", "jsonpath={.data.bundle\\.pem}")
		mounted, _ := c.sandboxSh(ctx, "cat /etc/keyhole/trust/bundle.pem")
		if holdsBoth(published) && holdsBoth(mounted) {
			t.Logf("the renewed CA reached the sandbox's bundle %v after the Secret changed", time.Since(renewedAt).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("4 minutes after the renewal: the published bundle holds both CAs: %v, the sandbox's: %v", holdsBoth(published), holdsBoth(mounted))
		}
		time.Sleep(3 * time.Second)
	}
	code, err := c.sandboxSh(ctx, `curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $GH_TOKEN" https://api.github.com/repos/acme/widgets`)
	if code != "200" {
		t.Errorf("after the renewal the API answered %q: %v", code, err)
	}
	logs, err := c.kubectl(ctx, nil, "logs", "-n", acmeNS, "deployment/"+map[string]string{"sidecar": acmeSandbox, "deployment": acmeProxy}[mode], "-c", "egress-proxy")
	if err != nil || !strings.Contains(logs, "the previous CA signs new leaves until the delay ends") {
		t.Errorf("the proxy did not log the renewal it holds back (%v)", err)
	}
	if after := c.proxyPod(t, ctx, mode); after != before {
		t.Errorf("the pod running the proxy changed (%s to %s): the renewal restarted it", before, after)
	}
}
