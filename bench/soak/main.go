// Command soak runs the real keyhole-proxy binary for a bounded time on
// loopback, against a real TLS upstream, under mixed traffic: allowed and
// refused requests on several injected hosts (header, basic and
// substitute injection, method, path and body rules), a passthrough host,
// refused hosts, clients that vanish mid-body and mid-response. Meanwhile
// it rotates the mounted Secret every -rotate as the kubelet does (a new
// timestamped directory, then one rename of ..data) and swaps the config
// every -reload. Every minute it records requests, errors by class, p50
// and p99 latency, and the proxy's RSS, goroutines and open files. At the
// end it stops the proxy and scans every line it logged for every secret
// value it ever held.
//
// It stops itself after -duration, removes its files and exits non-zero
// when any request went wrong, a secret reached a log line or a response,
// or the proxy did not stop cleanly. bench/soak/run.sh builds and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	proxyBin string
	duration time.Duration
	rate     int
	workers  int
	rotate   time.Duration
	reload   time.Duration
	settle   time.Duration
	keep     bool
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.proxyBin, "proxy-bin", "", "path to the keyhole-proxy binary (required)")
	fs.DurationVar(&o.duration, "duration", 30*time.Minute, "how long the traffic runs")
	fs.IntVar(&o.rate, "rate", 60, "requests started per second, across all workers")
	fs.IntVar(&o.workers, "workers", 8, "concurrent clients")
	fs.DurationVar(&o.rotate, "rotate", time.Minute, "how often the mounted Secret is rotated")
	fs.DurationVar(&o.reload, "reload", time.Minute, "how often the config is swapped (half a period after each rotation)")
	fs.DurationVar(&o.settle, "settle", 95*time.Second, "how long the proxy idles after the traffic before the last sample (its idle upstream connections time out after 90s)")
	fs.BoolVar(&o.keep, "keep", false, "keep the working directory (proxy log, config, secrets) instead of removing it")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if o.proxyBin == "" || o.duration <= 0 || o.rate < 1 || o.workers < 1 || o.rotate <= 0 || o.reload <= 0 || o.settle < 0 {
		fmt.Fprintln(stderr, "soak: -proxy-bin is required; -duration, -rate, -workers, -rotate and -reload must be positive")
		return 2
	}
	// SIGINT or SIGTERM ends the traffic early; the report and the
	// cleanup still run.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := soak(ctx, o, stderr)
	if rep != nil {
		rep.print(stdout, o)
	}
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 1
	}
	if !rep.clean() {
		fmt.Fprintln(stderr, "soak: problems found; see the report")
		return 1
	}
	return 0
}

// soak sets up the environment, runs the traffic and the changes until the
// deadline, stops the proxy and gathers the report.
func soak(ctx context.Context, o options, stderr io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "keyhole-soak-")
	if err != nil {
		return nil, err
	}
	if o.keep {
		fmt.Fprintln(stderr, "soak: working directory", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	e, err := newEnv(dir)
	if err != nil {
		return nil, err
	}
	defer e.close()
	p, err := e.startProxy(o.proxyBin)
	if err != nil {
		return nil, err
	}
	defer p.kill()

	rep := &report{start: time.Now()}
	rep.idleBefore, err = p.sample(time.Now())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.duration)
	defer cancel()
	tr := newTraffic(e, p.addr, o)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr.run(ctx)
	}()
	changes := make(chan error, 1)
	go func() { changes <- e.changeLoop(ctx, o, p, tr, rep) }()

	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	minute := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-tick.C:
			minute++
			rep.addMinute(minute, false, tr.takeWindow(), p, now)
		}
	}
	<-done
	if err := <-changes; err != nil {
		rep.problems = append(rep.problems, "changes: "+err.Error())
	}
	minute++
	rep.addMinute(minute, true, tr.takeWindow(), p, time.Now())
	rep.traffic = tr.totals()
	rep.end = time.Now()

	// Idle again: the clients close their connections, and the proxy
	// should come back to what it held before the traffic.
	tr.closeIdle()
	time.Sleep(o.settle)
	rep.idleAfter, err = p.sample(time.Now())
	if err != nil {
		rep.problems = append(rep.problems, "sampling the idle proxy: "+err.Error())
	}
	rep.metrics = p.metricsText()
	rep.upstream = e.up.totals()
	if err := p.stop(); err != nil {
		rep.problems = append(rep.problems, "stopping the proxy: "+err.Error())
	}
	rep.logScan, err = scanLog(p.logFile, e.secrets.everValue())
	if err != nil {
		rep.problems = append(rep.problems, "scanning the proxy log: "+err.Error())
	}
	return rep, nil
}
