// Package render turns a compiled Plan into the files that deploy it: per
// sandbox the proxy config the egress proxy loads, the placeholder
// environment (env.json and .env), and plain Kubernetes manifests (the
// sandbox Deployment, the egress proxy, its config, the cert-manager CA,
// the trust bundle and a NetworkPolicy), plus one kustomization.yaml that
// lists every manifest. It derives no policy: everything it writes comes
// from the Plan and the Options. Output is deterministic: the same Plan and
// Options give the same bytes. See docs/render.md for the layout.
package render

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy/config"
)

// Proxy modes: where the egress proxy runs relative to its sandbox.
const (
	// ModeSidecar runs the proxy as a native sidecar container in the
	// sandbox's pod, in transparent mode: the sandbox reaches it on
	// loopback through HTTPS_PROXY, and an init container's nat rules
	// redirect every other TCP connection of the pod but the proxy's to
	// it, so a client that ignores HTTPS_PROXY is held to the same policy
	// (docs/proxy.md, transparent mode).
	ModeSidecar = "sidecar"
	// ModeDeployment runs the proxy as its own Deployment and Service, so
	// the sandbox's pod holds no Secret volume at all and a NetworkPolicy
	// can confine the sandbox to the proxy alone.
	ModeDeployment = "deployment"
)

// DefaultProxyImage is the proxy image when Options.ProxyImage is empty:
// the image `make images` builds (scripts/images.sh), pinned by tag so a
// render is reproducible; override it to pin by digest. It is the only
// image the proxy's pod runs: its init container is the same binary.
const DefaultProxyImage = "ghcr.io/keyhole-dev/keyhole-proxy:v0.1.0"

// DefaultNetInitImage is the transparent-mode init container's image when
// Options.NetInitImage is empty: Debian's iptables package and the
// keyhole-proxy binary, whose transparent-init command writes the rules
// (scripts/images.sh builds it).
const DefaultNetInitImage = "ghcr.io/keyhole-dev/keyhole-netinit:v0.1.0"

// Ports the rendered proxy listens on. The admin port serves /healthz,
// /readyz and /metrics and is what the probes call.
const (
	ProxyPort = 3128
	AdminPort = 9090
	// TransparentPort is the sidecar's transparent listener on
	// 127.0.0.1, where the pod's nat rules redirect the sandbox's TCP.
	TransparentPort = 3129
	// DNSPort is the sidecar's DNS listener on 127.0.0.1, UDP and TCP,
	// where the pod's nat rules redirect the sandbox's port 53: it
	// answers only the names the proxy config allows.
	DNSPort = 3053
)

// Paths inside the containers. The proxy's Secret and CA paths are the
// proxy/config defaults; the rest are the renderer's choice, documented in
// docs/render.md.
const (
	// ProxyConfigDir is where the proxy-config ConfigMap is mounted.
	ProxyConfigDir = "/etc/keyhole/proxy"
	// TrustDir is where the sandbox finds bundle.pem.
	TrustDir = "/etc/keyhole/trust"
	// BundleFile is the CA bundle the sandbox's CA variables point at.
	BundleFile = TrustDir + "/bundle.pem"
	// TrustStoreName is the bundle as a passwordless PKCS#12 trust store
	// in TrustDir, for Java (JAVA_TOOL_OPTIONS).
	TrustStoreName = "truststore.p12"
	// WgetRCName is a wgetrc in TrustDir naming the bundle (WGETRC).
	WgetRCName = "wgetrc"
	// PHPIniName is an ini file in TrustDir naming the bundle for PHP's
	// curl and openssl extensions (PHP_INI_SCAN_DIR).
	PHPIniName = "php-keyhole.ini"
)

// MarkerFile is written by WriteDir at the top of every output directory.
// WriteDir only replaces a directory that is empty or holds this file, so
// it never deletes files keyhole did not write.
const MarkerFile = ".keyhole-render"

// Errors returned by this package wrap one of these, so callers can map
// them to exit codes with errors.Is.
var (
	// ErrInvalidPlan: the Plan cannot be rendered (a name that makes an
	// invalid Kubernetes name, no sandbox image, an unsafe env value...).
	ErrInvalidPlan = errors.New("plan cannot be rendered")
	// ErrInvalidOptions: an Options field holds an unknown value.
	ErrInvalidOptions = errors.New("invalid render options")
	// ErrEmpty: there is nothing to render; an empty stream would make
	// Argo CD prune every object of the application.
	ErrEmpty = errors.New("nothing to render")
	// ErrNotOwned: the output directory holds files keyhole did not write.
	ErrNotOwned = errors.New("output directory not written by keyhole")
	// ErrInvalidFile: a File has an unsafe or duplicate Path.
	ErrInvalidFile = errors.New("invalid output file")
)

// Options are the choices a render makes that the Plan does not.
type Options struct {
	// ProxyMode is ModeSidecar (the default when empty) or ModeDeployment.
	ProxyMode string
	// ProxyImage runs the egress proxy; DefaultProxyImage when empty.
	ProxyImage string
	// NetInitImage installs the transparent-mode rules in a sidecar
	// pod; DefaultNetInitImage when empty.
	NetInitImage string
	// DefaultSandboxImage is used for a sandbox whose Plan names no image.
	// A sandbox with neither is an error: a Deployment needs an image.
	DefaultSandboxImage string
	// NoProxy lists extra NO_PROXY entries, appended after loopback.
	NoProxy []string
	// ProxyResolve maps upstream names for the proxy, each HOST:PORT:ADDR
	// as curl's --resolve: the proxy connects to ADDR for HOST:PORT. For
	// an upstream reached at another address than DNS gives (a test's
	// fake, an internal mirror); the names still must verify.
	ProxyResolve []string
	// UpstreamCAConfigMap names a ConfigMap in the sandbox's namespace
	// whose key ca.crt the proxy verifies upstreams with instead of its
	// image's system roots (a TLS-inspecting egress gateway's CA, a
	// test's fake). Empty: the system roots.
	UpstreamCAConfigMap string
	// UpstreamProxy is the forward proxy, http://host:port, the cluster
	// reaches the internet through: each proxy config gets it as its
	// upstreamProxy, its own address exempt from the internal-address
	// checks, and the sidecar pod's NetworkPolicy admits its port. Empty:
	// the proxy dials upstreams itself.
	UpstreamProxy string
	// OTLPEndpoint is the OpenTelemetry collector's base URL (http or
	// https) the proxy exports its request log to: the proxy container
	// gets it as OTEL_EXPORTER_OTLP_ENDPOINT, and the sidecar pod's
	// NetworkPolicy admits its port. Empty: no export.
	OTLPEndpoint string
	// DefaultNamespace is the namespace of a sandbox whose Plan names
	// none (an agent.yaml agent); "default" when empty. A RoleBinding to
	// a ServiceAccount must name its namespace, so every object gets one.
	DefaultNamespace string
	// Reuse, when set, gives a sandbox the files an equal sandbox
	// rendered to before, rather than rendering it again (see Reuse).
	// The files are the same either way.
	Reuse *Reuse
	// Put, when set, takes each file as soon as it is rendered (a
	// DirWriter's Unit), and the renderer returns its files without their
	// Data: a render of thousands of sandboxes then holds the bytes of a
	// few at a time instead of all of them. Put is called from several
	// goroutines at once, in no set order.
	Put func(File) error
}

// File is one rendered output file.
type File struct {
	// Path is slash-separated and relative to the output directory.
	Path string
	Data []byte
}

func (o Options) withDefaults() (Options, error) {
	if o.ProxyMode == "" {
		o.ProxyMode = ModeSidecar
	}
	if o.ProxyMode != ModeSidecar && o.ProxyMode != ModeDeployment {
		return o, fmt.Errorf("%w: proxy mode %q (want %s or %s)", ErrInvalidOptions, o.ProxyMode, ModeSidecar, ModeDeployment)
	}
	if o.ProxyImage == "" {
		o.ProxyImage = DefaultProxyImage
	}
	if o.NetInitImage == "" {
		o.NetInitImage = DefaultNetInitImage
	}
	if o.DefaultNamespace == "" {
		o.DefaultNamespace = "default"
	}
	if !dnsLabel.MatchString(o.DefaultNamespace) || len(o.DefaultNamespace) > 63 {
		return o, fmt.Errorf("%w: default namespace %q is not a DNS label", ErrInvalidOptions, o.DefaultNamespace)
	}
	for _, r := range o.ProxyResolve {
		if err := checkResolve(r); err != nil {
			return o, fmt.Errorf("%w: proxy resolve %q: %w", ErrInvalidOptions, r, err)
		}
	}
	if n := o.UpstreamCAConfigMap; n != "" && (len(n) > 253 || !dnsSubdomain.MatchString(n)) {
		return o, fmt.Errorf("%w: upstream CA ConfigMap %q is not a DNS subdomain", ErrInvalidOptions, n)
	}
	if v := o.UpstreamProxy; v != "" {
		if err := checkUpstreamProxy(v); err != nil {
			return o, fmt.Errorf("%w: upstream proxy %s %w", ErrInvalidOptions, shownURL(v), err)
		}
	}
	if v := o.OTLPEndpoint; v != "" {
		if err := checkOTLPEndpoint(v); err != nil {
			return o, fmt.Errorf("%w: OTLP endpoint %s %w", ErrInvalidOptions, shownURL(v), err)
		}
	}
	for _, n := range o.NoProxy {
		if n == "" || strings.ContainsAny(n, ", \t\r\n'\"\\") {
			return o, fmt.Errorf("%w: NO_PROXY entry %q", ErrInvalidOptions, n)
		}
	}
	return o, nil
}

// Render renders every sandbox of p. The result is sorted by Path and is
// the same bytes for the same inputs. It returns ErrEmpty when p has no
// sandboxes, since writing or streaming nothing would delete what runs.
func Render(p compiler.Plan, opts Options) ([]File, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if len(p.Sandboxes) == 0 {
		return nil, fmt.Errorf("%w: the plan has no sandboxes", ErrEmpty)
	}
	sandboxes := slices.Clone(p.Sandboxes)
	dirs := make([]string, len(sandboxes))
	seen := map[string]bool{}
	for i := range sandboxes {
		sb := &sandboxes[i]
		if sb.Namespace == "" {
			sb.Namespace = opts.DefaultNamespace
		}
		dir, err := sandboxDir(*sb)
		if err != nil {
			return nil, err
		}
		if seen[dir] {
			return nil, fmt.Errorf("%w: sandbox %s is listed twice", ErrInvalidPlan, describe(*sb))
		}
		if sb.Workload() && opts.ProxyMode == ModeSidecar {
			// The pod's identity would be the sandbox's too: the
			// cloud's token is mounted in, or served to, every
			// container of the pod.
			return nil, fmt.Errorf("%w: sandbox %s has a Connection of identity workload, the proxy's own, which needs the proxy in a pod of its own (proxy mode %s): in a sidecar the sandbox's containers share the pod's identity", ErrInvalidPlan, describe(*sb), ModeDeployment)
		}
		seen[dir] = true
		dirs[i] = dir
	}
	rendered, err := renderAll(sandboxes, dirs, opts)
	if err != nil {
		return nil, err
	}
	// (With Put, the files hold their paths only.)
	n := 1
	for _, fs := range rendered {
		n += len(fs)
	}
	files := make([]File, 0, n)
	manifests := make([]string, 0, n)
	for _, fs := range rendered {
		for _, f := range fs {
			if strings.HasSuffix(f.Path, ".yaml") {
				manifests = append(manifests, f.Path)
			}
		}
		files = append(files, fs...)
	}
	k, err := kustomization("", manifests)
	if err != nil {
		return nil, err
	}
	if k, err = put(k, opts.Put); err != nil {
		return nil, err
	}
	files = append(files, k)
	slices.SortFunc(files, byPath)
	return files, nil
}

// put gives f to p, when there is one, and returns f without its Data.
func put(f File, p func(File) error) (File, error) {
	if p == nil {
		return f, nil
	}
	if err := p(f); err != nil {
		return File{}, err
	}
	return File{Path: f.Path}, nil
}

// putAll gives files to p, when there is one, and returns them without
// their Data: for a renderer that makes its files all at once.
func putAll(files []File, p func(File) error) ([]File, error) {
	if p == nil {
		return files, nil
	}
	out := make([]File, len(files))
	for i, f := range files {
		var err error
		if out[i], err = put(f, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// renderAll renders the sandboxes on every CPU: YAML encoding dominates a
// large render and each sandbox's files depend on that sandbox alone.
// Results keep the input order, and the error reported is the first
// sandbox's, so the outcome does not depend on scheduling.
func renderAll(sandboxes []compiler.Sandbox, dirs []string, opts Options) ([][]File, error) {
	out := make([][]File, len(sandboxes))
	errs := make([]error, len(sandboxes))
	sh := newShared(opts)
	workers := min(runtime.GOMAXPROCS(0), len(sandboxes))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var e emitter
			for {
				i := int(next.Add(1) - 1)
				if i >= len(sandboxes) {
					return
				}
				out[i], errs[i] = opts.Reuse.render(sandboxes[i], dirs[i], opts, func() ([]File, error) {
					return renderSandbox(&e, sh, sandboxes[i], dirs[i], opts)
				})
				if errs[i] == nil {
					out[i], errs[i] = putAll(out[i], opts.Put)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dnsLabel is a Kubernetes DNS-1123 label: what a namespace, a Service and
// a label value built from the claim name must be.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// checkResolve accepts HOST:PORT:ADDR, where ADDR is an IP address or a
// host name, optionally with its own port (ADDR:PORT, [IPv6]:PORT), as the
// proxy's --resolve flag does.
func checkResolve(v string) error {
	host, rest, ok1 := strings.Cut(v, ":")
	port, addr, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || host == "" || addr == "" {
		return errors.New("not HOST:PORT:ADDR")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	if strings.ContainsAny(v, " \t\r\n,'\"\\$") {
		return errors.New("holds a space, comma, quote, backslash or dollar sign")
	}
	return nil
}

// longestSuffix is the longest suffix appended to a claim name for a
// Service or label value, which are limited to 63 characters; check holds
// sandbox names to the same rule (compiler.CheckSandboxName).
const longestSuffix = compiler.SandboxNameSuffix

func sandboxDir(sb compiler.Sandbox) (string, error) {
	if compiler.CheckSandboxName(sb.Name) != nil {
		return "", fmt.Errorf("%w: sandbox %s: name must be a DNS label of at most %d characters, since objects are named <name>%s",
			ErrInvalidPlan, describe(sb), compiler.MaxSandboxName, longestSuffix)
	}
	if !dnsLabel.MatchString(sb.Namespace) || len(sb.Namespace) > 63 {
		return "", fmt.Errorf("%w: sandbox %s: namespace is not a DNS label", ErrInvalidPlan, describe(sb))
	}
	return path.Join(sb.Namespace, sb.Name), nil
}

// describe names a sandbox in an error with its source position, quoting
// only names, never values.
func describe(sb compiler.Sandbox) string {
	s := fmt.Sprintf("%q", sb.Name)
	if sb.Namespace != "" {
		s = fmt.Sprintf("%q", sb.Namespace+"/"+sb.Name)
	}
	if sb.Pos.File != "" {
		s += " (" + sb.Pos.String() + ")"
	}
	return s
}

// renderSandbox renders one sandbox's files, encoding its manifests with
// e and putting sh's parts in them.
func renderSandbox(e *emitter, sh *shared, sb compiler.Sandbox, dir string, opts Options) ([]File, error) {
	image := sb.Image
	if image == "" {
		image = opts.DefaultSandboxImage
	}
	if image == "" {
		return nil, fmt.Errorf("%w: sandbox %s names no image and no default sandbox image is set", ErrInvalidPlan, describe(sb))
	}
	if u := opts.upstreamProxy(); u != nil {
		sb.Proxy.UpstreamProxy = u
	}
	proxyJSON, err := proxyConfigJSON(sb)
	if err == nil {
		err = refuseLiterals(&sb.Proxy, proxyJSON)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", describe(sb), err)
	}
	env, err := envVars(sb, opts)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", describe(sb), err)
	}
	envJSON, err := encodeEnvJSON(env)
	if err != nil {
		return nil, err
	}
	files := make([]File, 0, 3+12)
	files = append(files,
		File{Path: dir + "/proxy.json", Data: proxyJSON},
		File{Path: dir + "/env.json", Data: envJSON},
		File{Path: dir + "/.env", Data: encodeDotEnv(env)},
	)
	in := sandboxInput{sb: sb, image: image, env: env, proxyJSON: proxyJSON, opts: opts, shared: sh, secrets: sb.Secrets()}
	files, err = writeManifests(e, in, dir, files)
	if err != nil {
		return nil, fmt.Errorf("sandbox %s: %w", describe(sb), err)
	}
	return files, nil
}

// refuseLiterals refuses a proxy config that would put a credential into
// the proxy's ConfigMap: a header value that reads no Secret key (so it
// is sent as written), or any string with the shape of a known token.
// Check reports both at their positions (ConnectionValueLiteral,
// CredentialLiteral); this holds for any Plan. The error names the host
// or the shape, never the value.
func refuseLiterals(c *config.Config, proxyJSON []byte) error {
	for _, h := range c.Hosts {
		ins := []*config.Inject{&h.Inject}
		for _, r := range h.Rules {
			if r.Inject != nil {
				ins = append(ins, r.Inject)
			}
		}
		for _, in := range ins {
			if in.Header == nil {
				continue
			}
			if t, err := config.ParseTemplate(in.Header.Value); err == nil && len(t.Keys()) == 0 {
				return fmt.Errorf("%w: the %s header value for %s reads no Secret key, so the proxy's ConfigMap would hold it as written", ErrInvalidPlan, in.Header.Name, h.Name)
			}
		}
	}
	if sh, ok := compiler.MatchCredential(string(proxyJSON)); ok {
		return fmt.Errorf("%w: the proxy config holds a token of the shape %s (%s...), which its ConfigMap would hold in plain text", ErrInvalidPlan, sh.Name, sh.Prefix)
	}
	return nil
}

// DescribeMode says, in lines for `keyhole explain`, what a proxy mode
// enforces: where the proxy runs and what holds a client that ignores
// HTTPS_PROXY.
func DescribeMode(mode string) ([]string, error) {
	switch mode {
	case ModeSidecar, "":
		return []string{
			"proxy mode: sidecar, transparent (enforcing)",
			fmt.Sprintf("  clients that honour HTTPS_PROXY reach the proxy on 127.0.0.1:%d", ProxyPort),
			fmt.Sprintf("  every other TCP connection of the pod, except the proxy's own (UID %d), is redirected to the proxy", proxyUID),
			"  and decided by its TLS server name with the same policy; TLS without a server name and non-TLS TCP are refused",
			"  DNS (port 53, to any address) is answered by the proxy, for the config's names only; other UDP and IPv6 egress are refused",
		}, nil
	case ModeDeployment:
		return []string{
			"proxy mode: deployment (enforcing)",
			fmt.Sprintf("  clients that honour HTTPS_PROXY reach the proxy's Service on port %d, at its cluster IP", ProxyPort),
			"  the sandbox's NetworkPolicy lets its pod reach only the proxy, and no DNS: a client that ignores HTTPS_PROXY reaches nothing",
		}, nil
	}
	return nil, fmt.Errorf("%w: proxy mode %q (want %s or %s)", ErrInvalidOptions, mode, ModeSidecar, ModeDeployment)
}
