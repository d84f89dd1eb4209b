// Package proxycmd is the command line of the egress proxy: flags in,
// exit code out. Both `keyhole-proxy` and `keyhole proxy` call Main, so
// the two never drift apart.
package proxycmd

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/internal/memlimit"
	"keyhole.dev/keyhole/internal/version"
	"keyhole.dev/keyhole/proxy"
	"keyhole.dev/keyhole/proxy/trust"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1 // the proxy started but could not keep serving
	exitUsage   = 2 // bad flags, or a config or CA that does not load
)

// resolveFlag collects repeated --resolve HOST:PORT:ADDR values.
type resolveFlag map[string]string

// String prints the mappings, for flag defaults.
func (r resolveFlag) String() string { return fmt.Sprint(map[string]string(r)) }

// Set parses HOST:PORT:ADDR as curl does; ADDR may also carry its own
// port ("127.0.0.1:8443", "[::1]:8443") so tests can point a name at an
// ephemeral port.
func (r resolveFlag) Set(v string) error {
	host, rest, ok1 := strings.Cut(v, ":")
	port, addr, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 || host == "" || addr == "" {
		return fmt.Errorf("%q is not HOST:PORT:ADDR", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a number from 1 to 65535", v, port)
	}
	var to string
	if h, p, err := net.SplitHostPort(addr); err == nil {
		to = net.JoinHostPort(h, p)
	} else {
		to = net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(addr, "["), "]"), port)
	}
	r[strings.ToLower(net.JoinHostPort(strings.TrimSuffix(host, "."), port))] = to
	return nil
}

// Main runs the proxy until SIGTERM or SIGINT and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	// A proxy beside a sandbox runs in a pod with a memory limit: the
	// collector keeps the heap under it rather than be killed at it.
	memlimit.Apply(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return run(ctx, args, stdout, stderr, nil)
}

// run is Main with the context and a hook that receives the bound
// addresses, for in-process tests.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, bound func(proxyAddr, adminAddr net.Addr)) int {
	if len(args) > 0 && args[0] == trustBundleCommand {
		return runTrustBundle(ctx, args[1:], stderr, os.Getenv, trust.ServiceAccountDir)
	}
	if len(args) > 0 && args[0] == transparentInitCommand {
		return runTransparentInit(ctx, args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("keyhole-proxy", flag.ContinueOnError)
	// Asked for, help is the output (stdout, exit 0); a mistake is one
	// line on stderr, not the whole help.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // the flag package calls it on every error too
	usage := func() {
		fmt.Fprintln(stdout, "usage: keyhole-proxy --config FILE [flags]\n       keyhole-proxy "+trustBundleCommand+" --ca FILE [--out FILE] [--configmap NAME] [flags]\n       keyhole-proxy "+transparentInitCommand+" --proxy-uid UID --port PORT [flags]")
		io.WriteString(stdout, helpExamples)
		fmt.Fprintln(stdout, "\nflags:")
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	var (
		configPath  = fs.String("config", "", "the proxy config `FILE`, proxy.json as keyhole render writes it (required)")
		listen      = fs.String("listen", ":3128", "address the sandbox's HTTPS_PROXY points at")
		transparent = fs.String("transparent-listen", "", "address the pod's nat rules redirect the sandbox's TCP to (transparent mode); empty disables")
		dnsListen   = fs.String("dns-listen", "", "address to answer the sandbox's DNS on, UDP and TCP (sidecar mode: the pod's rules redirect port 53 to it); allowed names only, nothing forwarded; empty disables")
		adminListen = fs.String("admin-listen", "127.0.0.1:9090", "address for /healthz, /readyz and /metrics; empty disables (keyhole render passes :9090 for the kubelet's probes)")
		caCert      = fs.String("ca-cert", "", "sandbox CA certificate (PEM); overrides the config")
		caKey       = fs.String("ca-key", "", "sandbox CA private key (PEM); overrides the config")
		localCAOut  = fs.String("local-ca", "", "mint a sandbox CA for this run and write its certificate to `FILE` for clients to trust (its key stays private to the run and is removed at exit); for runs outside a cluster, instead of --ca-cert and --ca-key")
		secretsDir  = fs.String("secrets-dir", "", "directory of mounted Secrets, <secret>/<key>; overrides the config")
		stateFile   = fs.String("state-file", "", "`FILE` to keep the refresh tokens authorization servers rotate, in a volume of the proxy's own; empty keeps them in memory")
		upstreamCA  = fs.String("upstream-ca", "", "PEM bundle to verify upstreams with instead of the system roots")
		maxTunnels  = fs.Int("max-tunnels", proxy.DefaultMaxTunnels, "maximum concurrent CONNECT tunnels")
		reload      = fs.Duration("reload-interval", 2*time.Second, "how often to check the config and CA files for changes")
		caSwitch    = fs.Duration("ca-switch-delay", 5*time.Minute, "how long a renewed CA waits before it signs new leaves, while the previous one (if still valid) goes on signing: the time the renewed CA takes to reach the sandboxes' trust bundles; 0 switches at once")
		shutdown    = fs.Duration("shutdown-timeout", 25*time.Second, "how long to drain in-flight requests on SIGTERM")
		logFlush    = fs.Duration("log-flush-interval", 100*time.Millisecond, "how long a log line may wait to be written with others; 0 writes each at once")
		showVersion = fs.Bool("version", false, "print the version and exit")
		resolve     = resolveFlag{}
	)
	fs.Var(resolve, "resolve", "HOST:PORT:ADDR: connect to ADDR for HOST:PORT, as curl --resolve (repeatable)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return exitOK
		}
		fmt.Fprintf(stderr, "keyhole-proxy: %s; run 'keyhole-proxy -h' for the flags\n", flagProblem(fs, err))
		return exitUsage
	}
	if *showVersion {
		fmt.Fprintln(stdout, "keyhole-proxy", version.Get())
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "keyhole-proxy: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "keyhole-proxy: --config is required")
		return exitUsage
	}
	if *maxTunnels < 1 {
		fmt.Fprintln(stderr, "keyhole-proxy: --max-tunnels must be at least 1")
		return exitUsage
	}
	if *caSwitch < 0 {
		fmt.Fprintln(stderr, "keyhole-proxy: --ca-switch-delay must not be negative")
		return exitUsage
	}
	if *logFlush < 0 {
		fmt.Fprintln(stderr, "keyhole-proxy: --log-flush-interval must not be negative")
		return exitUsage
	}
	if *localCAOut != "" {
		if *caCert != "" || *caKey != "" {
			fmt.Fprintln(stderr, "keyhole-proxy: --local-ca mints the CA that --ca-cert and --ca-key would name: give one or the other")
			return exitUsage
		}
		certFile, keyFile, cleanup, err := localCA(*localCAOut, time.Now())
		if err != nil {
			fmt.Fprintf(stderr, "keyhole-proxy: %v\n", err)
			return exitUsage
		}
		defer cleanup()
		*caCert, *caKey = certFile, keyFile
	}
	// The request lines and slog's events share stderr, which need not
	// be safe for concurrent writes: the buffer's lock keeps each line
	// whole and in order.
	logOut := newLogBuffer(stderr, *logFlush)
	defer logOut.Close()
	// failf writes an error after the lines logged before it.
	failf := func(format string, args ...any) {
		logOut.Close()
		fmt.Fprintf(stderr, format, args...)
	}
	logger := slog.New(slog.NewJSONHandler(logOut, nil))
	// net/http reports some upstream misbehaviour through the standard
	// logger, quoting what the upstream sent (bytes found on an idle
	// connection), which may echo the credential. Such a line becomes a
	// WARN event without the quoted part.
	prevOut, prevFlags := log.Writer(), log.Flags()
	log.SetOutput(stdLogSink{logger})
	log.SetFlags(0)
	defer func() { log.SetOutput(prevOut); log.SetFlags(prevFlags) }()
	opts := proxy.Options{
		ConfigPath:     *configPath,
		SecretsDir:     *secretsDir,
		StateFile:      *stateFile,
		CACert:         *caCert,
		CAKey:          *caKey,
		Resolve:        resolve,
		MaxTunnels:     *maxTunnels,
		ReloadInterval: *reload,
		CASwitchDelay:  *caSwitch,
		Timeouts:       proxy.Timeouts{Shutdown: *shutdown},
		Logger:         logger,
		RequestLog:     logOut,
	}
	// The request log also goes to an OpenTelemetry collector when the
	// standard OTEL_EXPORTER_OTLP_* variables name one.
	otlpLogs, err := proxy.OTLPConfigFromEnv(os.Getenv)
	if err != nil {
		failf("keyhole-proxy: %v\n", err)
		return exitUsage
	}
	opts.OTLPLogs = otlpLogs
	if *upstreamCA != "" {
		pem, err := os.ReadFile(*upstreamCA)
		if err != nil {
			failf("keyhole-proxy: --upstream-ca: %v\n", err)
			return exitUsage
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			failf("keyhole-proxy: --upstream-ca %s: no PEM certificates\n", *upstreamCA)
			return exitUsage
		}
		opts.UpstreamRoots = pool
	}
	srv, err := proxy.New(opts)
	if err != nil {
		failf("keyhole-proxy: %v\n", err)
		return exitUsage
	}
	// opened are the listeners bound so far, closed when a later one
	// cannot be.
	var opened []io.Closer
	listenFailed := func(flag string, err error) int {
		for _, c := range opened {
			c.Close()
		}
		failf("keyhole-proxy: %s: %v\n", flag, err)
		return exitRuntime
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return listenFailed("--listen", err)
	}
	opened = append(opened, ln)
	var tln net.Listener
	if *transparent != "" {
		if tln, err = net.Listen("tcp", *transparent); err != nil {
			return listenFailed("--transparent-listen", err)
		}
		opened = append(opened, tln)
	}
	var dnsUDP net.PacketConn
	var dnsTCP net.Listener
	if *dnsListen != "" {
		if dnsUDP, dnsTCP, err = listenDNS(*dnsListen); err != nil {
			return listenFailed("--dns-listen", err)
		}
		opened = append(opened, dnsUDP, dnsTCP)
	}
	var admin net.Listener
	if *adminListen != "" {
		if admin, err = net.Listen("tcp", *adminListen); err != nil {
			return listenFailed("--admin-listen", err)
		}
	}
	attrs := []any{"listen", ln.Addr().String()}
	if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
		attrs = append(attrs, "memory_limit", lim) // GOMEMLIMIT's, or the cgroup's share
	}
	if tln != nil {
		attrs = append(attrs, "transparent", tln.Addr().String())
	}
	if dnsUDP != nil {
		attrs = append(attrs, "dns", dnsUDP.LocalAddr().String())
	}
	if otlpLogs != nil {
		attrs = append(attrs, "otlp_logs", otlpLogs.Origin())
	}
	var adminAddr net.Addr
	if admin != nil {
		adminAddr = admin.Addr()
		attrs = append(attrs, "admin", adminAddr.String())
	}
	opts.Logger.Info("keyhole-proxy listening", attrs...)
	logOut.Flush() // whoever waits for the proxy to be up reads this line
	if bound != nil {
		bound(ln.Addr(), adminAddr)
	}
	if err := srv.Serve(ctx, proxy.Listeners{Proxy: ln, Transparent: tln, Admin: admin, DNS: dnsUDP, DNSTCP: dnsTCP}); err != nil {
		failf("keyhole-proxy: %v\n", err)
		return exitRuntime
	}
	opts.Logger.Info("keyhole-proxy stopped")
	return exitOK
}

// helpExamples are -h's examples: in a pod, as keyhole render runs the
// proxy, and on a workstation with what render wrote, where the Secret's
// keys are files and the CA is minted for the run.
const helpExamples = `
examples:
  keyhole-proxy --config /etc/keyhole/proxy.json --listen :3128 --admin-listen :9090   # in a pod, as render runs it

  # on a workstation, over what 'keyhole render examples/github-acme -o rendered/' wrote:
  # the Secret's keys as files, <secret>/<key>, and a CA minted for the run
  mkdir -p secrets/acme-github-token && printf %s "$GITHUB_TOKEN" > secrets/acme-github-token/token
  keyhole proxy --config rendered/agents/support-workspace/proxy.json --secrets-dir secrets \
    --local-ca ca.pem --listen 127.0.0.1:3128 --admin-listen ''
  # then, from another shell: the proxy puts the token on the request
  curl --proxy http://127.0.0.1:3128 --cacert ca.pem https://api.github.com/repos/acme/widgets
`

// flagProblem says what is wrong with a command line the flag package
// refused: for an unknown flag, its name and the nearest flag there is.
func flagProblem(fs *flag.FlagSet, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err.Error()
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if near := diag.Suggest(name, names); near != "" {
		return fmt.Sprintf("unknown flag --%s (did you mean --%s?)", name, near)
	}
	return "unknown flag --" + name
}

// listenDNS binds addr for UDP, then the same port for TCP: a port 0
// becomes one port for both.
func listenDNS(addr string) (net.PacketConn, net.Listener, error) {
	host, want, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	// With port 0 the system picks a free UDP port, which another
	// program may hold in TCP: pick again, a few times.
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
		ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if want != "0" || attempt == 15 || !errors.Is(err, syscall.EADDRINUSE) {
			return nil, nil, err
		}
	}
}
