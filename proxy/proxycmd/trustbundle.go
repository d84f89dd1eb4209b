package proxycmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"keyhole.dev/keyhole/proxy/trust"
)

// trustBundleCommand builds the sandbox's trust bundle and publishes it;
// the rendered proxy pod runs it as an init container, so the proxy image
// is the only image that pod needs.
const trustBundleCommand = "trust-bundle"

// runTrustBundle writes the system roots plus the sandbox CA's
// certificate to --out and server-side applies them to the --configmap,
// retrying the apply until --timeout while the API server is not yet
// reachable.
func runTrustBundle(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string, saDir string) int {
	fs := flag.NewFlagSet("keyhole-proxy "+trustBundleCommand, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: keyhole-proxy "+trustBundleCommand+" --ca FILE [--out FILE] [--configmap NAME] [flags]")
		fs.PrintDefaults()
	}
	var (
		ca           = fs.String("ca", "", "the sandbox CA's public certificate (PEM; required); never its key")
		roots        = fs.String("roots", "/etc/ssl/certs/ca-certificates.crt", "the system roots (PEM) the bundle starts with")
		out          = fs.String("out", "", "write the bundle to this `file`")
		configMap    = fs.String("configmap", "", "server-side apply the bundle to this ConfigMap `name`, through the pod's service account")
		namespace    = fs.String("namespace", "", "the ConfigMap's `namespace` (default: $POD_NAMESPACE, else the service account's)")
		key          = fs.String("key", "bundle.pem", "the ConfigMap key")
		fieldManager = fs.String("field-manager", "keyhole-egress-trust", "the field manager that owns the key")
		timeout      = fs.Duration("timeout", 2*time.Minute, "how long to retry the apply")
		truststore   = fs.String("truststore", "", "also write the bundle as a PKCS#12 trust store without password (Java) to this `file`")
		wgetrc       = fs.String("wgetrc", "", "also write a wgetrc pointing wget at the bundle to this `file`")
		bundlePath   = fs.String("bundle-path", "/etc/keyhole/trust/bundle.pem", "where the sandbox sees bundle.pem, for the wgetrc")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "keyhole-proxy %s: unexpected argument %q\n", trustBundleCommand, fs.Arg(0))
		return exitUsage
	}
	if *ca == "" || (*out == "" && *configMap == "") {
		fmt.Fprintf(stderr, "keyhole-proxy %s: --ca and at least one of --out and --configmap are required\n", trustBundleCommand)
		return exitUsage
	}
	rootsPEM, err := os.ReadFile(*roots)
	if err != nil {
		fmt.Fprintf(stderr, "keyhole-proxy %s: --roots: %v\n", trustBundleCommand, err)
		return exitUsage
	}
	caPEM, err := os.ReadFile(*ca)
	if err != nil {
		fmt.Fprintf(stderr, "keyhole-proxy %s: --ca: %v\n", trustBundleCommand, err)
		return exitUsage
	}
	bundle, err := trust.Bundle(rootsPEM, caPEM)
	if err != nil {
		fmt.Fprintf(stderr, "keyhole-proxy %s: %v\n", trustBundleCommand, err)
		return exitUsage
	}
	p12, err := trust.TrustStore(bundle)
	if err != nil {
		fmt.Fprintf(stderr, "keyhole-proxy %s: %v\n", trustBundleCommand, err)
		return exitUsage
	}
	rc := trust.WgetRC(*bundlePath)
	for _, f := range []struct {
		flag, path string
		data       []byte
	}{{"--out", *out, bundle}, {"--truststore", *truststore, p12}, {"--wgetrc", *wgetrc, rc}} {
		if f.path == "" {
			continue
		}
		if err := writeFileAtomic(f.path, f.data); err != nil {
			fmt.Fprintf(stderr, "keyhole-proxy %s: %s: %v\n", trustBundleCommand, f.flag, err)
			return exitRuntime
		}
		fmt.Fprintf(stderr, "keyhole-proxy %s: wrote %s\n", trustBundleCommand, f.path)
	}
	if *configMap == "" {
		return exitOK
	}
	ns := *namespace
	if ns == "" {
		ns = getenv("POD_NAMESPACE")
	}
	if ns == "" {
		b, err := os.ReadFile(filepath.Join(saDir, "namespace"))
		if err != nil {
			fmt.Fprintf(stderr, "keyhole-proxy %s: no --namespace, no $POD_NAMESPACE and no service account namespace: %v\n", trustBundleCommand, err)
			return exitUsage
		}
		ns = strings.TrimSpace(string(b))
	}
	client, err := trust.InCluster(getenv, saDir)
	if err != nil {
		fmt.Fprintf(stderr, "keyhole-proxy %s: %v\n", trustBundleCommand, err)
		return exitRuntime
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	for wait := time.Second; ; wait = min(2*wait, 10*time.Second) {
		err = client.ApplyConfigMap(ctx, ns, *configMap, *fieldManager,
			map[string]string{*key: string(bundle), trust.WgetRCKey: string(rc)},
			map[string][]byte{trust.TrustStoreKey: p12})
		if err == nil {
			fmt.Fprintf(stderr, "keyhole-proxy %s: applied ConfigMap %s/%s keys %s, %s, %s\n", trustBundleCommand, ns, *configMap, *key, trust.WgetRCKey, trust.TrustStoreKey)
			return exitOK
		}
		fmt.Fprintf(stderr, "keyhole-proxy %s: %v\n", trustBundleCommand, err)
		select {
		case <-ctx.Done():
			return exitRuntime
		case <-time.After(wait):
		}
	}
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it, so a reader never sees half a bundle.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".bundle-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
