// Command proxybench measures keyhole-proxy on loopback against the same
// TLS upstream reached directly and through mitmproxy (mitmdump), side by
// side in one run, so the machine's noise hits every contender alike:
//
//   - keep-alive requests per second at -conns concurrent connections,
//     1 KiB responses, with the credential injected (the proxy's hot path);
//   - median latency of one sequential keep-alive connection, and what the
//     proxy adds to the direct median;
//   - new-tunnel rate: CONNECT plus TLS handshake for every request;
//   - p50 and p99 request latency at -conns and -conns-high connections;
//   - unary gRPC calls per second at -conns concurrent calls on one
//     HTTP/2 connection, with p50 and p99, keyhole against direct;
//   - WebSocket round trips: -ws-messages 1 KiB text messages, each
//     sent after the echo of the one before, on one WebSocket, with p50
//     and p99, keyhole against direct;
//   - Server-Sent Events: each event's delay from the upstream's write to
//     the client's read, p50 and p99, over a stream of -stream-duration;
//   - a -bulk-size MiB download and a -upload-size MiB upload: MiB/s, and
//     the proxy's RSS during each against its RSS at rest;
//   - fresh proxies: RSS with no tunnel, per idle tunnel (-idle of them)
//     and per busy tunnel, and peak RSS (VmHWM) with the idle tunnels.
//
// With -base-bin, a second keyhole-proxy build runs beside the current
// one in every measurement, so a change's cost is a ratio from one run.
// Each measurement runs -runs times, interleaved, and the medians are
// reported with the proxy's targets. bench/proxy/run.sh builds the
// binaries and runs it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"keyhole.dev/keyhole/internal/testpki"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	proxyBin  string
	mitmdump  string
	runs      int
	duration  time.Duration
	conns     int
	connsHigh int
	idle      int
	tunnelers int
	// baseBin is a second keyhole-proxy build measured beside proxyBin,
	// named by baseLabel.
	baseBin, baseLabel string
	streamDuration     time.Duration
	bulk, upload       int // MiB
	wsMessages         int
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("proxybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.proxyBin, "proxy-bin", "", "path to the keyhole-proxy binary (required)")
	fs.StringVar(&o.mitmdump, "mitmdump", "mitmdump", "mitmdump binary for the mitmproxy peer (Debian package mitmproxy)")
	fs.IntVar(&o.runs, "runs", 5, "how many times each measurement runs; medians are reported")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of each throughput measurement")
	fs.IntVar(&o.conns, "conns", 16, "concurrent keep-alive connections")
	fs.IntVar(&o.connsHigh, "conns-high", 64, "concurrent keep-alive connections for the tail-latency and busy-tunnel measurements")
	fs.StringVar(&o.baseBin, "base-bin", "", "a second keyhole-proxy binary, measured beside -proxy-bin in every measurement")
	fs.StringVar(&o.baseLabel, "base-label", "base", "what the tables call the -base-bin build: keyhole (LABEL)")
	fs.DurationVar(&o.streamDuration, "stream-duration", 10*time.Second, "length of each event stream; 0 skips the streams")
	fs.IntVar(&o.bulk, "bulk-size", 256, "MiB downloaded in the bulk measurement; 0 skips the bulk transfers")
	fs.IntVar(&o.upload, "upload-size", 64, "MiB uploaded in the bulk measurement")
	fs.IntVar(&o.wsMessages, "ws-messages", 2000, "WebSocket round trips per run; 0 skips the WebSocket measurement")
	// keyhole holds at most 512 tunnels by default (--max-tunnels and
	// the proxy listener's connection cap); more would be refused or
	// queued, so the default weighs what a default proxy can hold.
	fs.IntVar(&o.idle, "idle", 512, "idle tunnels held open for the RSS measurement")
	fs.IntVar(&o.tunnelers, "tunnel-workers", 8, "concurrent clients in the new-tunnel measurement")
	serve := fs.String("serve-upstream", "", "internal: run as the upstream process with the certificate in this directory")
	serveFl := fs.String("serve-floor", "", "internal: run as the terminating floor with the files in this directory")
	floorUp := fs.String("floor-upstream", "", "internal: the upstream address the terminating floor dials")
	sketch := fs.Bool("floor-sketch", false, "internal: run the fast-path sketch instead of the floor")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *serveFl != "" {
		return serveFloor(*serveFl, *floorUp, *sketch, stdout)
	}
	if *serve != "" {
		return serveUpstream(*serve, stdout)
	}
	if o.proxyBin == "" || o.runs < 1 || o.conns < 1 || o.connsHigh < 1 || o.idle < 0 || o.duration <= 0 ||
		o.streamDuration < 0 || o.bulk < 0 || o.wsMessages < 0 || o.bulk > maxBulk>>20 || o.upload < 1 || o.upload > maxBulk>>20 || o.baseLabel == "" {
		fmt.Fprintln(stderr, "proxybench: -proxy-bin is required; -runs, -conns, -conns-high, -duration and -upload-size must be positive, -stream-duration, -bulk-size, -ws-messages and -idle not negative, sizes at most 16 GiB")
		return 2
	}
	mitm, err := exec.LookPath(o.mitmdump)
	if err != nil {
		fmt.Fprintf(stderr, "proxybench: %s not found: run apt-get install -y mitmproxy\n", o.mitmdump)
		return 1
	}
	o.mitmdump = mitm
	res, err := bench(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "proxybench:", err)
		return 1
	}
	res.print(stdout, o)
	return 0
}

// The host the workload targets: injected by keyhole, resolved to the
// local upstream by --resolve (keyhole) or an addon (mitmproxy).
const (
	benchHost = "api.github.com"
	// tunnelHost is a passthrough host resolved to the same upstream: the
	// control route with no TLS termination.
	tunnelHost = "tunnel.bench.test"
	benchPath  = "/repos/acme/widgets"
	token      = "ghp_bench_token_not_a_secret_0123456789"
	bodySize   = 1024
)

// env is everything the contenders share: CAs, the upstream, the files.
type env struct {
	dir        string
	sandboxCA  *testpki.FileCA
	upstreamCA *testpki.FileCA
	upstream   string // host:port
	// upstreamProc serves the upstream in its own process, so that every
	// route, direct included, crosses a process boundary to reach it.
	upstreamProc *process
	configFile   string
	// scrubConfigFile is configFile with scrubResponseBodies set.
	scrubConfigFile string
	secretsDir      string
	stderr          io.Writer
	// grpc is the gRPC upstream (grpc.go).
	grpc *grpcUpstream
	// ws is the WebSocket echo upstream (ws.go).
	ws *wsUpstream
}

// newEnv writes the CAs, the Secret and the proxy config, and starts the
// upstream: 1 KiB JSON-ish bodies, answered only with the injected token.
func newEnv(dir string, stderr io.Writer) (*env, error) {
	e := &env{dir: dir, stderr: stderr}
	var err error
	if e.sandboxCA, err = testpki.NewFileCA(dir, "sandbox-ca"); err != nil {
		return nil, err
	}
	if e.upstreamCA, err = testpki.NewFileCA(dir, "upstream-ca"); err != nil {
		return nil, err
	}
	if err := e.upstreamCA.WriteLeaf(filepath.Join(dir, "upstream.crt"), filepath.Join(dir, "upstream.key"), benchHost, tunnelHost); err != nil {
		return nil, err
	}
	// The terminating floor and the sketch present this leaf (floor.go).
	if err := e.sandboxCA.WriteLeaf(filepath.Join(dir, "floor.crt"), filepath.Join(dir, "floor.key"), benchHost); err != nil {
		return nil, err
	}
	if err := e.startUpstream(); err != nil {
		return nil, err
	}
	if err := e.startGRPCUpstream(); err != nil {
		return nil, err
	}
	if err := e.startWSUpstream(); err != nil {
		return nil, err
	}

	e.secretsDir = filepath.Join(dir, "secrets")
	if err := os.MkdirAll(filepath.Join(e.secretsDir, "bench-token"), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(e.secretsDir, "bench-token", "token"), []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	cfg := map[string]any{
		"apiVersion": "proxy.keyhole.dev/v1alpha1",
		"kind":       "ProxyConfig",
		"sandbox":    map[string]string{"name": "bench"},
		"hosts": []any{map[string]any{
			"name":       grpcHost,
			"connection": "bench-grpc",
			"inject": map[string]any{
				"secret": "bench-token",
				"header": map[string]string{"name": "Authorization", "value": "Bearer {{ .token }}"},
			},
			"rules": []any{map[string]any{"methods": []string{"POST"}, "pathPrefixes": []string{grpcMethod}}},
		}, map[string]any{
			"name":       wsHost,
			"connection": "bench-ws",
			"inject": map[string]any{
				"secret": "bench-token",
				"header": map[string]string{"name": "Authorization", "value": "Bearer {{ .token }}"},
			},
			"rules": []any{map[string]any{"methods": []string{"GET"}, "pathPrefixes": []string{wsPath}, "websocket": true}},
		}, map[string]any{
			"name":       benchHost,
			"connection": "bench",
			"inject": map[string]any{
				"secret": "bench-token",
				"header": map[string]string{"name": "Authorization", "value": "Bearer {{ .token }}"},
			},
			"rules": []any{
				map[string]any{"methods": []string{"GET", "HEAD"}, "pathPrefixes": []string{benchPath}},
				map[string]any{"methods": []string{"PUT"}, "pathPrefixes": []string{uploadPath}},
			},
		}},
		"passthrough": []string{tunnelHost},
	}
	e.configFile = filepath.Join(dir, "proxy.json")
	if err := writeJSON(e.configFile, cfg); err != nil {
		return nil, err
	}
	// The same with response bodies scrubbed of the credential, for
	// streams and bulk transfers.
	cfg["scrubResponseBodies"] = true
	e.scrubConfigFile = filepath.Join(dir, "proxy-scrub.json")
	if err := writeJSON(e.scrubConfigFile, cfg); err != nil {
		return nil, err
	}
	return e, nil
}

func writeJSON(file string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o600)
}

// Route names, as the table prints them.
const (
	nameDirect  = "direct"
	nameKeyhole = "keyhole"
	nameMitm    = "mitmproxy"
	nameTunnel  = "keyhole passthrough"
	nameFloor   = "terminating floor"
	nameSketch  = "fast-path sketch"
)

// keyholeBuild is one keyhole-proxy binary under test: the current one,
// or the one built at -base-bin's ref.
type keyholeBuild struct {
	name, bin string
}

// baseName is the name of the base build's route, "" without one.
func (o options) baseName() string {
	if o.baseBin == "" {
		return ""
	}
	return "keyhole (" + o.baseLabel + ")"
}

func (o options) builds() []keyholeBuild {
	b := []keyholeBuild{{name: nameKeyhole, bin: o.proxyBin}}
	if o.baseBin != "" {
		b = append(b, keyholeBuild{name: o.baseName(), bin: o.baseBin})
	}
	return b
}

// contenders are the processes a phase runs, by route name.
type contenders map[string]*process

func (c contenders) stop() {
	for _, p := range c {
		p.stop()
	}
}

// startBuilds starts every keyhole build with the config file cfg.
func (e *env) startBuilds(o options, cfg string, c contenders) error {
	for _, b := range o.builds() {
		p, err := e.startKeyhole(b, cfg)
		if err != nil {
			return err
		}
		c[b.name] = p
	}
	return nil
}

// rotate returns routes starting at the i-th, so that a burst of noise on
// the shared machine does not always land on the same contender.
func rotate(routes []route, i int) []route {
	out := make([]route, 0, len(routes))
	for j := range routes {
		out = append(out, routes[(i+j)%len(routes)])
	}
	return out
}

// bench runs every measurement o.runs times, interleaving the contenders.
func bench(o options, stderr io.Writer) (*results, error) {
	dir, err := os.MkdirTemp("", "proxybench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e, err := newEnv(dir, stderr)
	if err != nil {
		return nil, err
	}
	defer e.upstreamProc.stop()
	defer e.grpc.srv.Stop()
	defer e.ws.srv.Close()
	r := newResults()

	procs := contenders{}
	defer procs.stop()
	if err := e.startBuilds(o, e.configFile, procs); err != nil {
		return nil, err
	}
	if procs[nameMitm], err = e.startMitm(o.mitmdump); err != nil {
		return nil, err
	}
	if procs[nameFloor], err = e.startFloor(false); err != nil {
		return nil, err
	}
	if procs[nameSketch], err = e.startFloor(true); err != nil {
		return nil, err
	}
	procs[nameTunnel] = procs[nameKeyhole]
	var builds []route
	for _, b := range o.builds() {
		builds = append(builds, e.injected(b.name, procs[b.name].addr))
	}
	mitm, floor := e.injected(nameMitm, procs[nameMitm].addr), e.injected(nameFloor, procs[nameFloor].addr)
	routes := append(append([]route{e.direct()}, builds...), mitm, e.tunnelled(procs[nameKeyhole].addr), floor,
		e.injected(nameSketch, procs[nameSketch].addr))
	highRoutes := append(append([]route{e.direct()}, builds...), mitm, floor)
	tunnelRoutes := append(append([]route{}, builds...), mitm, e.tunnelled(procs[nameKeyhole].addr), floor)
	for _, rt := range routes {
		if err := e.client(rt, true).get(); err != nil {
			return nil, fmt.Errorf("route %s cannot serve the workload: %w (logs in %s)", rt.name, err, dir)
		}
	}

	for i := 0; i < o.runs; i++ {
		fmt.Fprintf(stderr, "run %d/%d: keep-alive", i+1, o.runs)
		for _, rt := range rotate(routes, i) {
			before, err := e.stats()
			if err != nil {
				return nil, fmt.Errorf("upstream stats: %w", err)
			}
			upCPU, _ := cpuTime(e.upstreamProc.cmd.Process.Pid)
			var pxCPU time.Duration
			p := procs[rt.name]
			if p != nil {
				pxCPU, _ = cpuTime(p.cmd.Process.Pid)
			}
			t0 := time.Now()
			res := e.keepAlive(rt, o.conns, o.duration)
			reqs := res.rate * time.Since(t0).Seconds()
			r.fail("keep-alive "+rt.name, res.failed)
			r.add(mRPS, rt.name, res.rate)
			r.addPercentiles(mP50, mP99, rt.name, res.samples)
			if up, err := cpuTime(e.upstreamProc.cmd.Process.Pid); err == nil && reqs > 0 {
				r.add(mUpCPU, rt.name, float64(up-upCPU)/float64(time.Microsecond)/reqs)
			}
			if p != nil && reqs > 0 {
				if px, err := cpuTime(p.cmd.Process.Pid); err == nil {
					r.add(mProxyCPU, rt.name, float64(px-pxCPU)/float64(time.Microsecond)/reqs)
				}
			}
			after, err := e.stats()
			if err != nil {
				return nil, fmt.Errorf("upstream stats: %w", err)
			}
			// One connection is the stats request's own.
			fmt.Fprintf(stderr, " [%s: %.0f req/s, %d new upstream connections]", rt.name, res.rate, after.Conns-before.Conns-1)
		}

		fmt.Fprintf(stderr, ", %d conns", o.connsHigh)
		for _, rt := range rotate(highRoutes, i) {
			res := e.keepAlive(rt, o.connsHigh, o.duration)
			r.fail(fmt.Sprintf("keep-alive %d conns %s", o.connsHigh, rt.name), res.failed)
			r.add(mRPSHigh, rt.name, res.rate)
			r.addPercentiles(mP50High, mP99High, rt.name, res.samples)
		}

		fmt.Fprint(stderr, ", latency")
		for _, rt := range rotate(routes, i) {
			l, err := e.latency(rt, o.duration*2/3)
			if err != nil {
				return nil, fmt.Errorf("%s latency: %w", rt.name, err)
			}
			r.add(mLatency, rt.name, float64(l)/float64(time.Microsecond))
		}

		fmt.Fprint(stderr, ", gRPC")
		for _, rt := range rotate(append([]route{e.direct()}, builds...), i) {
			rate, samples, failed, err := e.grpcUnary(rt, o.conns, o.duration)
			if err != nil {
				return nil, fmt.Errorf("%s gRPC: %w (logs in %s)", rt.name, err, dir)
			}
			r.fail("gRPC "+rt.name, failed)
			r.add(mGRPC, rt.name, rate)
			r.addPercentiles(mGRPCP50, mGRPCP99, rt.name, samples)
		}

		if o.wsMessages > 0 {
			fmt.Fprint(stderr, ", WebSocket")
			for _, rt := range rotate(append([]route{e.direct()}, builds...), i) {
				rate, samples, err := e.wsRoundTrips(rt, o.wsMessages)
				if err != nil {
					return nil, fmt.Errorf("%s WebSocket: %w (logs in %s)", rt.name, err, dir)
				}
				r.add(mWS, rt.name, rate)
				r.addPercentiles(mWSP50, mWSP99, rt.name, samples)
			}
		}

		fmt.Fprint(stderr, ", new tunnels\n")
		for _, rt := range rotate(tunnelRoutes, i) {
			res := e.newTunnels(rt, o.tunnelers, o.duration)
			r.fail("new-tunnel "+rt.name, res.failed)
			r.add(mTunnels, rt.name, res.rate)
		}
	}
	// Streams and transfers go through builds with response bodies
	// scrubbed: the most work a proxy does per byte.
	for _, b := range o.builds() {
		procs[b.name].stop()
	}
	if o.streamDuration > 0 || o.bulk > 0 {
		if err := e.startBuilds(o, e.scrubConfigFile, procs); err != nil {
			return nil, err
		}
		builds = builds[:0]
		for _, b := range o.builds() {
			builds = append(builds, e.injected(b.name, procs[b.name].addr))
		}
		streamRoutes := append(append([]route{e.direct()}, builds...), mitm, floor)
		for i := 0; i < o.runs; i++ {
			if o.streamDuration > 0 {
				fmt.Fprintf(stderr, "run %d/%d: streams of %v:", i+1, o.runs, o.streamDuration)
				for _, rt := range rotate(streamRoutes, i) {
					delays, err := e.stream(rt, o.streamDuration)
					if err != nil {
						fmt.Fprintf(stderr, " [%s: %v]", rt.name, err)
						r.fail("stream "+rt.name, 1)
					} else {
						fmt.Fprintf(stderr, " [%s: %d events]", rt.name, len(delays))
					}
					r.add(mEvents, rt.name, float64(len(delays)))
					late := 0
					for _, d := range delays {
						if d >= streamInterval {
							late++
						}
					}
					r.add(mLate, rt.name, float64(late))
					r.addPercentiles(mStreamP50, mStreamP99, rt.name, delays)
				}
				fmt.Fprintln(stderr)
			}
			if o.bulk > 0 {
				fmt.Fprintf(stderr, "run %d/%d: %d MiB down, %d MiB up:", i+1, o.runs, o.bulk, o.upload)
				for _, rt := range rotate(streamRoutes, i) {
					e.transfers(o, rt, procs[rt.name], r, stderr)
				}
				fmt.Fprintln(stderr)
			}
		}
		for _, b := range o.builds() {
			procs[b.name].stop()
		}
	}
	procs[nameMitm].stop()

	if o.idle > 0 {
		if err := e.memory(o, r, stderr); err != nil {
			return nil, err
		}
	}
	st, err := e.stats()
	if err != nil {
		return nil, fmt.Errorf("upstream stats: %w", err)
	}
	r.upstreamRefused = st.Refused + e.grpc.refused.Load() + e.ws.refused.Load()
	return r, nil
}

// addPercentiles records the p50 and p99 of samples in µs, or NaN for
// a run that has none.
func (r *results) addPercentiles(p50, p99 metric, name string, samples []time.Duration) {
	for _, p := range []struct {
		m metric
		p float64
	}{{p50, 50}, {p99, 99}} {
		v, ok := percentile(samples, p.p)
		if !ok {
			r.add(p.m, name, math.NaN())
			continue
		}
		r.add(p.m, name, float64(v)/float64(time.Microsecond))
	}
}

// transfers measures one download and one upload through rt, and the
// RSS of the route's proxy p (nil for direct) at rest and during each.
func (e *env) transfers(o options, rt route, p *process, r *results, stderr io.Writer) {
	block := bulkBlock()
	rss := func() float64 {
		if p == nil {
			return math.NaN()
		}
		_, v, err := procStatus(p.cmd.Process.Pid)
		if err != nil {
			return math.NaN()
		}
		return float64(v) / 1024
	}
	// during runs a transfer of mib MiB and returns its MiB/s, the
	// proxy's peak RSS (MiB) and the CPU time it spent per MiB (ms).
	during := func(mib int, f func() (float64, error)) (float64, float64, float64, error) {
		if p == nil {
			v, err := f()
			return v, math.NaN(), math.NaN(), err
		}
		pid := p.cmd.Process.Pid
		cpu0, err0 := cpuTime(pid)
		s := sampleRSS(pid)
		v, err := f()
		peak := float64(s.stop()) / 1024
		cpu1, err1 := cpuTime(pid)
		perMiB := math.NaN()
		if err0 == nil && err1 == nil {
			perMiB = float64(cpu1-cpu0) / float64(time.Millisecond) / float64(mib)
		}
		return v, peak, perMiB, err
	}
	if p != nil {
		r.add(mRest, rt.name, rss())
	}
	down, peakDown, cpuDown, err := during(o.bulk, func() (float64, error) { return e.download(rt, int64(o.bulk)<<20) })
	if err != nil {
		fmt.Fprintf(stderr, " [%s download: %v]", rt.name, err)
		r.fail("download "+rt.name, 1)
		down = math.NaN()
	}
	up, peakUp, cpuUp, err := during(o.upload, func() (float64, error) { return e.upload(rt, int64(o.upload)<<20, block) })
	if err != nil {
		fmt.Fprintf(stderr, " [%s upload: %v]", rt.name, err)
		r.fail("upload "+rt.name, 1)
		up = math.NaN()
	}
	fmt.Fprintf(stderr, " [%s: %.0f MiB/s down, %.0f up]", rt.name, down, up)
	r.add(mDownload, rt.name, down)
	r.add(mUpload, rt.name, up)
	if p != nil {
		r.add(mPeakDown, rt.name, peakDown)
		r.add(mPeakUp, rt.name, peakUp)
		r.add(mCPUDown, rt.name, cpuDown)
		r.add(mCPUUp, rt.name, cpuUp)
	}
}

// memory measures fresh proxies: at rest, holding o.idle idle tunnels
// and carrying o.connsHigh busy ones. Peak RSS needs a fresh process per
// figure: VmHWM never goes down, and a Go heap is given back slowly.
// mitmproxy runs once: it is slow to fill with tunnels.
func (e *env) memory(o options, r *results, stderr io.Writer) error {
	type job struct {
		name  string
		start func() (*process, error)
		busy  bool
	}
	var jobs []job
	for i := 0; i < o.runs; i++ {
		for _, b := range o.builds() {
			start := func() (*process, error) { return e.startKeyhole(b, e.configFile) }
			jobs = append(jobs, job{b.name, start, false}, job{b.name, start, true})
		}
	}
	jobs = append(jobs, job{nameMitm, func() (*process, error) { return e.startMitm(o.mitmdump) }, false})
	for k, j := range jobs {
		what := fmt.Sprintf("%d idle tunnels", o.idle)
		if j.busy {
			what = fmt.Sprintf("%d busy tunnels", o.connsHigh)
		}
		fmt.Fprintf(stderr, "memory %d/%d: %s with %s\n", k+1, len(jobs), j.name, what)
		p, err := j.start()
		if err != nil {
			return err
		}
		time.Sleep(time.Second)
		_, rest, err := procStatus(p.cmd.Process.Pid)
		if err != nil {
			p.stop()
			return err
		}
		if j.busy {
			peak, res := e.busyTunnels(p, o.connsHigh, o.duration)
			r.fail("busy tunnels "+j.name, res.failed)
			r.add(mBusyRSS, j.name, float64(peak)/1024)
			r.add(mPerBusy, j.name, float64(peak-rest)/float64(o.connsHigh))
			p.stop()
			continue
		}
		r.add(mFresh, j.name, float64(rest)/1024)
		hwm, rss, opened, err := e.idleTunnels(p, o.idle, o.tunnelers)
		p.stop()
		if err != nil {
			fmt.Fprintf(stderr, "%s idle tunnels: %v\n", j.name, err)
		}
		r.add(mHWM, j.name, float64(hwm)/1024)
		r.add(mIdleRSS, j.name, float64(rss)/1024)
		if opened > 0 {
			r.add(mPerIdle, j.name, float64(rss-rest)/float64(opened))
		}
		r.opened[j.name] = opened
	}
	return nil
}
