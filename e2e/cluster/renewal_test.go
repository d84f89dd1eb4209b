//go:build e2e

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// caSwitchWait bounds the wait for the proxy to sign with the renewed CA:
// the kubelet's update of the Secret's volume (a minute or so), then the
// proxy's default --ca-switch-delay of 5 minutes.
const caSwitchWait = 8 * time.Minute

// checkCARenewal renews the sandbox CA the way a user does, with what
// `cmctl renew` does, and follows it to the sandbox without restarting
// anything: cert-manager writes a new key and certificate into
// <claim>-egress-ca, egress-trust-watch publishes a bundle holding the new
// CA beside the previous one, the sandbox's trust directory gets it (the
// emptyDir as a sidecar, the ConfigMap volume as a Deployment), the proxy
// logs that the previous CA goes on signing until its switch delay ends,
// requests keep working throughout, and once the delay has passed the
// proxy's leaves are signed by the new CA.
func (c *cluster) checkCARenewal(t *testing.T, ctx context.Context, mode string) {
	before := c.proxyPod(t, ctx, mode)
	if out, err := c.sandboxSh(ctx, `cat /etc/keyhole/trust/php-keyhole.ini; echo "PHP_INI_SCAN_DIR=$PHP_INI_SCAN_DIR"`); err != nil ||
		!strings.Contains(out, `curl.cainfo = "/etc/keyhole/trust/bundle.pem"`) || !strings.Contains(out, "PHP_INI_SCAN_DIR=:/etc/keyhole/trust") {
		t.Errorf("the sandbox's PHP ini file and scan directory: %q, %v", out, err)
	}
	prevCA, previous, err := c.caSecretCert(ctx)
	if err != nil {
		t.Fatal(err)
	}

	c.renewCertificate(t, ctx)
	renewedAt := time.Now()
	c.waitCertificate(t, ctx, 2)
	ca, cert, err := c.caSecretCert(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cert-manager re-issued the CA %v after the Issuing condition was set", time.Since(renewedAt).Round(time.Second))
	checkIssuedCA(t, ca)
	if ca.SerialNumber.Cmp(prevCA.SerialNumber) == 0 || bytes.Equal(ca.RawSubjectPublicKeyInfo, prevCA.RawSubjectPublicKeyInfo) {
		t.Fatalf("the renewed CA has the same serial (%v) or the same key (%v) as the previous one",
			ca.SerialNumber.Cmp(prevCA.SerialNumber) == 0, bytes.Equal(ca.RawSubjectPublicKeyInfo, prevCA.RawSubjectPublicKeyInfo))
	}

	holdsBoth := func(bundle string) bool {
		return strings.Contains(bundle, previous) && strings.HasSuffix(bundle, cert)
	}
	deadline := renewedAt.Add(4 * time.Minute)
	for {
		published, _ := c.kubectl(ctx, nil, "get", "configmap", acmeTrust, "-n", acmeNS, "-o", "jsonpath={.data.bundle\\.pem}")
		mounted, _ := c.sandboxSh(ctx, "cat /etc/keyhole/trust/bundle.pem")
		if holdsBoth(published) && holdsBoth(mounted) {
			t.Logf("the renewed CA reached the sandbox's bundle %v after the renewal was asked for", time.Since(renewedAt).Round(time.Second))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("4 minutes after the renewal: the published bundle holds both CAs: %v, the sandbox's: %v", holdsBoth(published), holdsBoth(mounted))
		}
		time.Sleep(3 * time.Second)
	}
	const apiCall = `curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $GH_TOKEN" https://api.github.com/repos/acme/widgets`
	code, err := c.sandboxSh(ctx, apiCall)
	if code != "200" {
		t.Errorf("after the renewal the API answered %q: %v", code, err)
	}
	logs, err := c.kubectl(ctx, nil, "logs", "-n", acmeNS, "deployment/"+map[string]string{"sidecar": acmeSandbox, "deployment": acmeProxy}[mode], "-c", "egress-proxy")
	if err != nil || !strings.Contains(logs, "the previous CA signs new leaves until the delay ends") {
		t.Errorf("the proxy did not log the renewal it holds back (%v)", err)
	}

	// The switch waits out the proxy's 5-minute delay, so it is watched
	// in the default mode only; what differs between the modes (how the
	// bundle reaches the sandbox, which pod runs the proxy) is checked
	// above in both.
	if mode == "sidecar" {
		c.checkCASwitch(t, ctx, renewedAt, cert, previous, apiCall)
	}

	after := c.proxyPod(t, ctx, mode)
	if after != before {
		t.Errorf("the pod running the proxy changed (%s to %s): the renewal restarted it", before, after)
	}
	if _, counts, _ := strings.Cut(after, "/restarts="); strings.Trim(counts, "0") != "" {
		t.Errorf("a container of the proxy's pod restarted: %s", after)
	}
}

// checkCASwitch waits, from inside the sandbox, until the same request
// trusting only the renewed CA succeeds, that is until the proxy signs
// with it, then requires that trusting only the previous CA fails
// verification (curl's exit 60) and that the mounted bundle still works.
func (c *cluster) checkCASwitch(t *testing.T, ctx context.Context, renewedAt time.Time, cert, previous, apiCall string) {
	if _, err := c.sandboxSh(ctx, fmt.Sprintf("printf '%%s' '%s' >/tmp/ca-new.pem && printf '%%s' '%s' >/tmp/ca-previous.pem", cert, previous)); err != nil {
		t.Fatal(err)
	}
	switchDeadline := renewedAt.Add(caSwitchWait)
	for {
		code, _ := c.sandboxSh(ctx, strings.Replace(apiCall, "curl ", "curl --cacert /tmp/ca-new.pem ", 1))
		if code == "200" {
			t.Logf("the proxy's leaves are signed by the renewed CA %v after the renewal was asked for", time.Since(renewedAt).Round(time.Second))
			break
		}
		if time.Now().After(switchDeadline) {
			t.Fatalf("%v after the renewal a request trusting only the renewed CA still got %q", caSwitchWait, code)
		}
		time.Sleep(5 * time.Second)
	}
	if out, err := c.sandboxSh(ctx, strings.Replace(apiCall, "curl ", "curl --cacert /tmp/ca-previous.pem ", 1)+`; echo " exit=$?"`); err != nil || !strings.Contains(out, "exit=60") {
		t.Errorf("after the switch, trusting only the previous CA: %q, %v (want curl's exit 60)", out, err)
	}
	if code, err := c.sandboxSh(ctx, apiCall); code != "200" {
		t.Errorf("after the switch the API answered %q with the mounted bundle: %v", code, err)
	}
}
