// Command proxybench measures keyhole-proxy on loopback against the same
// TLS upstream reached directly and through mitmproxy (mitmdump), side by
// side in one run, so the machine's noise hits every contender alike:
//
//   - keep-alive requests per second at -conns concurrent connections,
//     1 KiB responses, with the credential injected (the proxy's hot path);
//   - median latency of one sequential keep-alive connection, and what the
//     proxy adds to the direct median;
//   - new-tunnel rate: CONNECT plus TLS handshake for every request;
//   - peak RSS (VmHWM) of a fresh proxy holding -idle idle tunnels.
//
// Each measurement runs -runs times, interleaved, and the medians are
// reported with the targets from the proxy's spec. bench/proxy/run.sh
// builds the binaries and runs it.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"
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
	idle      int
	tunnelers int
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
	if o.proxyBin == "" || o.runs < 1 || o.conns < 1 || o.idle < 0 || o.duration <= 0 {
		fmt.Fprintln(stderr, "proxybench: -proxy-bin is required; -runs, -conns and -duration must be positive")
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
	sandboxCA  *ca
	upstreamCA *ca
	upstream   string // host:port
	// upstreamProc serves the upstream in its own process, so that every
	// route, direct included, crosses a process boundary to reach it.
	upstreamProc *process
	configFile   string
	secretsDir   string
	stderr       io.Writer
}

// newEnv writes the CAs, the Secret and the proxy config, and starts the
// upstream: 1 KiB JSON-ish bodies, answered only with the injected token.
func newEnv(dir string, stderr io.Writer) (*env, error) {
	e := &env{dir: dir, stderr: stderr}
	var err error
	if e.sandboxCA, err = newCA(dir, "sandbox-ca"); err != nil {
		return nil, err
	}
	if e.upstreamCA, err = newCA(dir, "upstream-ca"); err != nil {
		return nil, err
	}
	if err := e.upstreamCA.writeLeaf(filepath.Join(dir, "upstream.crt"), filepath.Join(dir, "upstream.key"), benchHost, tunnelHost); err != nil {
		return nil, err
	}
	// The terminating floor and the sketch present this leaf (floor.go).
	if err := e.sandboxCA.writeLeaf(filepath.Join(dir, "floor.crt"), filepath.Join(dir, "floor.key"), benchHost); err != nil {
		return nil, err
	}
	if err := e.startUpstream(); err != nil {
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
			"name":       benchHost,
			"connection": "bench",
			"inject": map[string]any{
				"secret": "bench-token",
				"header": map[string]string{"name": "Authorization", "value": "Bearer {{ .token }}"},
			},
			"rules": []any{map[string]any{"methods": []string{"GET", "HEAD"}, "pathPrefixes": []string{benchPath}}},
		}},
		"passthrough": []string{tunnelHost},
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	e.configFile = filepath.Join(dir, "proxy.json")
	if err := os.WriteFile(e.configFile, data, 0o600); err != nil {
		return nil, err
	}
	return e, nil
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
	r := &results{
		rps: map[string]series{}, ratio: map[string]series{}, latency: map[string]series{},
		added: map[string]series{}, tunnels: map[string]series{}, hwm: map[string]series{},
		proxyCPU: map[string]series{}, upstreamCPU: map[string]series{},
		rss: map[string]series{}, opened: map[string]int{}, failures: map[string]int64{}, vsFloor: map[string]series{},
	}

	kh, err := e.startKeyhole(o.proxyBin)
	if err != nil {
		return nil, err
	}
	defer kh.stop()
	mp, err := e.startMitm(o.mitmdump)
	if err != nil {
		return nil, err
	}
	defer mp.stop()
	fl, err := e.startFloor(false)
	if err != nil {
		return nil, err
	}
	defer fl.stop()
	sk, err := e.startFloor(true)
	if err != nil {
		return nil, err
	}
	defer sk.stop()
	routes := []route{e.direct(), e.injected(nameKeyhole, kh.addr), e.injected(nameMitm, mp.addr), e.tunnelled(kh.addr),
		e.injected(nameFloor, fl.addr), e.injected(nameSketch, sk.addr)}
	procOf := map[string]*process{nameKeyhole: kh, nameMitm: mp, nameTunnel: kh, nameFloor: fl, nameSketch: sk}
	for _, rt := range routes {
		if err := e.client(rt, true).get(); err != nil {
			return nil, fmt.Errorf("route %s cannot serve the workload: %w (logs in %s)", rt.name, err, dir)
		}
	}

	for i := 0; i < o.runs; i++ {
		fmt.Fprintf(stderr, "run %d/%d: keep-alive", i+1, o.runs)
		// Rotate who goes first so a burst of noise on the shared
		// machine does not always land on the same contender.
		for j := range routes {
			rt := routes[(i+j)%len(routes)]
			before, err := e.stats()
			if err != nil {
				return nil, fmt.Errorf("upstream stats: %w", err)
			}
			upCPU, _ := cpuTime(e.upstreamProc.cmd.Process.Pid)
			var pxCPU time.Duration
			if p := procOf[rt.name]; p != nil {
				pxCPU, _ = cpuTime(p.cmd.Process.Pid)
			}
			t0 := time.Now()
			v, n := e.keepAlive(rt, o.conns, o.duration)
			reqs := v * time.Since(t0).Seconds()
			r.fail("keep-alive "+rt.name, n)
			r.rps[rt.name] = append(r.rps[rt.name], v)
			if up, err := cpuTime(e.upstreamProc.cmd.Process.Pid); err == nil && reqs > 0 {
				r.upstreamCPU[rt.name] = append(r.upstreamCPU[rt.name], float64(up-upCPU)/float64(time.Microsecond)/reqs)
			}
			if p := procOf[rt.name]; p != nil && reqs > 0 {
				if px, err := cpuTime(p.cmd.Process.Pid); err == nil {
					r.proxyCPU[rt.name] = append(r.proxyCPU[rt.name], float64(px-pxCPU)/float64(time.Microsecond)/reqs)
				}
			}
			after, err := e.stats()
			if err != nil {
				return nil, fmt.Errorf("upstream stats: %w", err)
			}
			// One connection is the stats request's own.
			fmt.Fprintf(stderr, " [%s: %.0f req/s, %d new upstream connections]", rt.name, v, after.Conns-before.Conns-1)
		}
		d := r.rps[nameDirect][i]
		for _, rt := range routes {
			r.ratio[rt.name] = append(r.ratio[rt.name], 100*r.rps[rt.name][i]/d)
		}

		fmt.Fprint(stderr, ", latency")
		lat := map[string]float64{}
		for j := range routes {
			rt := routes[(i+j)%len(routes)]
			l, err := e.latency(rt, o.duration*2/3)
			if err != nil {
				return nil, fmt.Errorf("%s latency: %w", rt.name, err)
			}
			lat[rt.name] = float64(l) / float64(time.Microsecond)
		}
		for _, rt := range routes {
			r.latency[rt.name] = append(r.latency[rt.name], lat[rt.name])
			r.added[rt.name] = append(r.added[rt.name], lat[rt.name]-lat[nameDirect])
		}

		fmt.Fprint(stderr, ", new tunnels\n")
		for _, rt := range routes[1:5] { // keyhole, mitmproxy, passthrough, the floor
			v, n := e.newTunnels(rt, o.tunnelers, o.duration)
			r.fail("new-tunnel "+rt.name, n)
			r.tunnels[rt.name] = append(r.tunnels[rt.name], v)
		}
		r.addFloorRatios(i)
	}
	kh.stop()
	mp.stop()

	// Peak RSS needs a fresh process per run: VmHWM never goes down.
	// mitmproxy runs once: it is slow to fill with tunnels.
	if o.idle > 0 {
		for i := 0; i < o.runs+1; i++ {
			name, start := nameKeyhole, func() (*process, error) { return e.startKeyhole(o.proxyBin) }
			if i == o.runs {
				name, start = nameMitm, func() (*process, error) { return e.startMitm(o.mitmdump) }
			}
			fmt.Fprintf(stderr, "idle %d/%d: %s with %d idle tunnels\n", i+1, o.runs+1, name, o.idle)
			p, err := start()
			if err != nil {
				return nil, err
			}
			hwm, rss, opened, err := e.idleTunnels(p, o.idle, o.tunnelers)
			p.stop()
			if err != nil {
				fmt.Fprintf(stderr, "%s idle tunnels: %v\n", name, err)
			}
			r.hwm[name] = append(r.hwm[name], float64(hwm)/1024)
			r.rss[name] = append(r.rss[name], float64(rss)/1024)
			r.opened[name] = opened
		}
	}
	st, err := e.stats()
	if err != nil {
		return nil, fmt.Errorf("upstream stats: %w", err)
	}
	r.upstreamRefused = st.Refused
	return r, nil
}
