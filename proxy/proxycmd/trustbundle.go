package proxycmd

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"keyhole.dev/keyhole/proxy/trust"
)

// trustBundleCommand builds the sandbox's trust bundle and publishes it;
// the rendered proxy pod runs it as an init container, so the proxy image
// is the only image that pod needs, and again with --watch as a sidecar
// that follows the CA's renewals.
const trustBundleCommand = "trust-bundle"

// subcommandFlags is the flag set of keyhole-proxy's subcommand cmd: its
// errors and help go to stderr, the help as the usage line (cmd, then
// args) and each flag's default.
func subcommandFlags(cmd, args string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("keyhole-proxy "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: keyhole-proxy "+cmd+" "+args)
		fs.PrintDefaults()
	}
	return fs
}

// runTrustBundle writes the system roots plus the sandbox CA's
// certificate to --out (and the files derived from it) and server-side
// applies them to the --configmap, retrying the apply until --timeout
// while the API server is not yet reachable. With --watch it then keeps
// running: each time the CA file changes it publishes again, with the
// previous CA kept in the bundle for --keep-previous, so a client that
// reads the new bundle trusts the leaves of either CA while the proxy
// moves from one to the other (docs/render.md, "When the CA is renewed").
func runTrustBundle(ctx context.Context, args []string, stderr io.Writer, getenv func(string) string, saDir string) int {
	fs := subcommandFlags(trustBundleCommand, "--ca FILE [--out FILE] [--configmap NAME] [--watch INTERVAL] [flags]", stderr)
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
		phpIni       = fs.String("php-ini", "", "also write a PHP ini file pointing PHP's curl and openssl extensions at the bundle to this `file`")
		bundlePath   = fs.String("bundle-path", "/etc/keyhole/trust/bundle.pem", "where the sandbox sees bundle.pem, for the wgetrc and the PHP ini file")
		watch        = fs.Duration("watch", 0, "after publishing, keep running and check the CA file this often, publishing again when it changes (0: publish once and exit)")
		keepPrevious = fs.Duration("keep-previous", time.Hour, "with --watch, how long a renewed CA's predecessor stays in the bundle")
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
	if *watch < 0 || *keepPrevious < 0 {
		fmt.Fprintf(stderr, "keyhole-proxy %s: --watch and --keep-previous must not be negative\n", trustBundleCommand)
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
	p := &publisher{
		stderr: stderr, roots: rootsPEM, out: *out, truststore: *truststore, wgetrc: *wgetrc, phpIni: *phpIni,
		bundlePath: *bundlePath, configMap: *configMap, key: *key, fieldManager: *fieldManager, timeout: *timeout,
	}
	cas := []heldCA{{pem: caPEM}}
	files, err := p.build(cas)
	if err != nil {
		fmt.Fprintf(stderr, "keyhole-proxy %s: %v\n", trustBundleCommand, err)
		return exitUsage
	}
	if *configMap != "" {
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
		p.namespace = ns
		if p.client, err = trust.InCluster(getenv, saDir); err != nil {
			fmt.Fprintf(stderr, "keyhole-proxy %s: %v\n", trustBundleCommand, err)
			return exitRuntime
		}
	}
	if err := p.publish(ctx, files); err != nil {
		return exitRuntime
	}
	if *watch == 0 {
		return exitOK
	}
	return p.watch(ctx, *ca, cas, *watch, *keepPrevious, time.Now)
}

// heldCA is a CA certificate the bundle holds: the current one, or a
// predecessor kept until its time is up (the zero until: never dropped).
type heldCA struct {
	pem   []byte
	until time.Time
}

// publisher builds the trust files from the roots and the CAs it holds,
// and writes and applies them.
type publisher struct {
	stderr                                  io.Writer
	roots                                   []byte
	out, truststore, wgetrc, phpIni         string
	bundlePath                              string
	configMap, namespace, key, fieldManager string
	timeout                                 time.Duration
	client                                  *trust.Client
}

// trustFiles is one publication: the bundle and what is derived from it.
type trustFiles struct {
	bundle, p12, wgetrc, phpIni []byte
}

func (p *publisher) build(cas []heldCA) (trustFiles, error) {
	pems := make([][]byte, len(cas))
	for i, c := range cas {
		pems[i] = c.pem
	}
	bundle, err := trust.Bundle(p.roots, pems...)
	if err != nil {
		return trustFiles{}, err
	}
	p12, err := trust.TrustStore(bundle)
	if err != nil {
		return trustFiles{}, err
	}
	return trustFiles{bundle: bundle, p12: p12, wgetrc: trust.WgetRC(p.bundlePath), phpIni: trust.PHPIni(p.bundlePath)}, nil
}

// publish writes the files and applies the ConfigMap; it has said why on
// stderr when it returns an error.
func (p *publisher) publish(ctx context.Context, f trustFiles) error {
	for _, w := range []struct {
		flag, path string
		data       []byte
	}{{"--out", p.out, f.bundle}, {"--truststore", p.truststore, f.p12}, {"--wgetrc", p.wgetrc, f.wgetrc}, {"--php-ini", p.phpIni, f.phpIni}} {
		if w.path == "" {
			continue
		}
		if err := writeFileAtomic(w.path, w.data); err != nil {
			fmt.Fprintf(p.stderr, "keyhole-proxy %s: %s: %v\n", trustBundleCommand, w.flag, err)
			return err
		}
		fmt.Fprintf(p.stderr, "keyhole-proxy %s: wrote %s\n", trustBundleCommand, w.path)
	}
	if p.configMap == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	for wait := time.Second; ; wait = min(2*wait, 10*time.Second) {
		err := p.client.ApplyConfigMap(ctx, p.namespace, p.configMap, p.fieldManager,
			map[string]string{p.key: string(f.bundle), trust.WgetRCKey: string(f.wgetrc), trust.PHPIniKey: string(f.phpIni)},
			map[string][]byte{trust.TrustStoreKey: f.p12})
		if err == nil {
			fmt.Fprintf(p.stderr, "keyhole-proxy %s: applied ConfigMap %s/%s keys %s, %s, %s, %s\n", trustBundleCommand, p.namespace, p.configMap, p.key, trust.WgetRCKey, trust.PHPIniKey, trust.TrustStoreKey)
			return nil
		}
		fmt.Fprintf(p.stderr, "keyhole-proxy %s: %v\n", trustBundleCommand, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// watch checks the CA file every interval until ctx ends. A changed CA
// is published with its predecessor, which is dropped (and the bundle
// published again) keep after the change. A CA file that does not parse,
// or a publication that fails, is logged and tried again at the next
// check: the files already published stay as they are.
func (p *publisher) watch(ctx context.Context, caFile string, cas []heldCA, interval, keep time.Duration, now func() time.Time) int {
	t := time.NewTicker(interval)
	defer t.Stop()
	var refused []byte // the CA file last refused, said once
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
		next := cas
		cur, err := os.ReadFile(caFile)
		if err != nil {
			fmt.Fprintf(p.stderr, "keyhole-proxy %s: --ca: %v; keeping the bundle as published\n", trustBundleCommand, err)
			continue
		}
		if !bytes.Equal(cur, cas[len(cas)-1].pem) {
			next = nil
			for _, c := range cas {
				if bytes.Equal(c.pem, cur) {
					continue // back to a predecessor: it is current again
				}
				if c.until.IsZero() {
					c.until = now().Add(keep)
				}
				next = append(next, c)
			}
			next = append(next, heldCA{pem: cur})
		}
		next = slices.DeleteFunc(slices.Clone(next), func(c heldCA) bool { return !c.until.IsZero() && !now().Before(c.until) })
		if slices.EqualFunc(next, cas, func(a, b heldCA) bool { return bytes.Equal(a.pem, b.pem) }) {
			continue
		}
		files, err := p.build(next)
		if err != nil {
			if !bytes.Equal(cur, refused) {
				fmt.Fprintf(p.stderr, "keyhole-proxy %s: %v; keeping the bundle as published\n", trustBundleCommand, err)
				refused = cur
			}
			continue
		}
		if p.publish(ctx, files) != nil {
			continue
		}
		fmt.Fprintf(p.stderr, "keyhole-proxy %s: the bundle now holds %d CA certificates\n", trustBundleCommand, len(next))
		cas = next
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
