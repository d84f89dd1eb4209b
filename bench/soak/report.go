package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// report is what the soak saw.
type report struct {
	start, end time.Time

	mu        sync.Mutex
	minutes   []minute
	rotations []rotation
	reloads   []reload

	idleBefore, idleAfter procSample
	traffic               map[string]map[string]int64
	upstream              map[string]int64
	metrics               string
	logScan               logScan
	problems              []string
}

type minute struct {
	n        int
	partial  bool // the seconds after the last whole minute
	requests int64
	errors   int64
	classes  map[string]int64
	p50, p99 time.Duration
	proc     procSample
	procErr  error
}

type rotation struct {
	class string // how the upstream classed the next request's credential
	err   error
}

type reload struct {
	took time.Duration
	err  error
}

func (r *report) addMinute(n int, partial bool, w window, p *proxyProc, now time.Time) {
	m := minute{n: n, partial: partial, requests: w.requests, classes: w.classes}
	for c, k := range w.classes {
		if !isOK(c) {
			m.errors += k
		}
	}
	m.p50, m.p99 = quantile(w.latencies, 0.50), quantile(w.latencies, 0.99)
	m.proc, m.procErr = p.sample(now)
	r.mu.Lock()
	r.minutes = append(r.minutes, m)
	r.mu.Unlock()
}

func (r *report) addRotation(class string, err error) {
	r.mu.Lock()
	r.rotations = append(r.rotations, rotation{class: class, err: err})
	r.mu.Unlock()
}

func (r *report) addReload(took time.Duration, err error) {
	r.mu.Lock()
	r.reloads = append(r.reloads, reload{took: took, err: err})
	r.mu.Unlock()
}

// quantile is the q-quantile of ds (nearest rank); 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

// logScan is what scanning the proxy's log found.
type logScan struct {
	lines, requestLines, notJSON int
	withSecret                   int
	secretsSearched              int
}

// scanLog reads every line the proxy wrote and counts those holding any
// secret value, as written or in base64 (as in Authorization: Basic).
func scanLog(path string, secrets []string) (logScan, error) {
	s := logScan{secretsSearched: len(secrets)}
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	needles := make([]string, 0, 2*len(secrets))
	for _, v := range secrets {
		needles = append(needles, v, base64.StdEncoding.EncodeToString([]byte(v)))
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		s.lines++
		var l struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal([]byte(line), &l) != nil {
			s.notJSON++
		} else if l.Msg == "request" {
			s.requestLines++
		}
		for _, n := range needles {
			if strings.Contains(line, n) {
				s.withSecret++
				break
			}
		}
	}
	return s, sc.Err()
}

// flat reports whether the idle proxy after the traffic holds about what
// it held before: a few goroutines and files of slack, no more.
func (r *report) flat() bool {
	return r.idleAfter.goroutines <= r.idleBefore.goroutines+3 && r.idleAfter.fds <= r.idleBefore.fds+3
}

// clean reports whether the soak found nothing wrong.
func (r *report) clean() bool {
	if len(r.problems) > 0 || r.logScan.withSecret > 0 || r.logScan.lines == 0 || !r.flat() {
		return false
	}
	for _, m := range r.minutes {
		if m.errors > 0 || m.procErr != nil {
			return false
		}
	}
	for _, ro := range r.rotations {
		if ro.err != nil || ro.class != credCurrent {
			return false
		}
	}
	for _, re := range r.reloads {
		if re.err != nil {
			return false
		}
	}
	return true
}

func (r *report) print(w io.Writer, o options) {
	fmt.Fprintf(w, "# keyhole-proxy soak\n\n")
	fmt.Fprintf(w, "%s to %s (%s of traffic), -rate %d, -workers %d, -rotate %s, -reload %s.\n\n",
		r.start.UTC().Format(time.RFC3339), r.end.UTC().Format(time.RFC3339), r.end.Sub(r.start).Round(time.Second), o.rate, o.workers, o.rotate, o.reload)

	fmt.Fprintln(w, "## Per minute")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| minute | requests | errors | p50 (ms) | p99 (ms) | RSS (MiB) | goroutines | open files | tunnels |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	fmt.Fprintf(w, "| idle, before | | | | | %.1f | %d | %d | %d |\n", mib(r.idleBefore.rssKiB), r.idleBefore.goroutines, r.idleBefore.fds, r.idleBefore.tunnels)
	var total, errs int64
	for _, m := range r.minutes {
		total += m.requests
		errs += m.errors
		label := fmt.Sprint(m.n)
		if m.partial {
			label = "rest"
		}
		if m.procErr != nil {
			fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f | sample failed: %v | | | |\n", label, m.requests, m.errors, ms(m.p50), ms(m.p99), m.procErr)
			continue
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.2f | %.2f | %.1f | %d | %d | %d |\n", label, m.requests, m.errors, ms(m.p50), ms(m.p99),
			mib(m.proc.rssKiB), m.proc.goroutines, m.proc.fds, m.proc.tunnels)
	}
	fmt.Fprintf(w, "| idle, after | | | | | %.1f | %d | %d | %d |\n\n", mib(r.idleAfter.rssKiB), r.idleAfter.goroutines, r.idleAfter.fds, r.idleAfter.tunnels)
	fmt.Fprintf(w, "Latency is the client's, end to end through the proxy, of requests that got the answer they expected. The idle rows are taken with no client connected: before the traffic, and after it once the proxy's idle upstream connections have timed out. Flat: %s.\n\n", yesNo(r.flat()))

	fmt.Fprintf(w, "## Requests: %d, errors: %d\n\n", total, errs)
	fmt.Fprintln(w, "| scenario | outcome | count |")
	fmt.Fprintln(w, "| --- | --- | ---: |")
	for _, s := range slices.Sorted(maps.Keys(r.traffic)) {
		for _, c := range slices.Sorted(maps.Keys(r.traffic[s])) {
			fmt.Fprintf(w, "| %s | %s | %d |\n", s, c, r.traffic[s][c])
		}
	}
	fmt.Fprintln(w)
	byClass := map[string]int64{}
	for _, m := range r.traffic {
		for c, n := range m {
			if !isOK(c) {
				byClass[c] += n
			}
		}
	}
	fmt.Fprint(w, "Errors by class:")
	if len(byClass) == 0 {
		fmt.Fprint(w, " none")
	}
	for _, c := range slices.Sorted(maps.Keys(byClass)) {
		fmt.Fprintf(w, " %s %d;", c, byClass[c])
	}
	fmt.Fprint(w, "\n\n")

	fmt.Fprintln(w, "## Changes")
	fmt.Fprintln(w)
	wrongRot := 0
	for _, ro := range r.rotations {
		if ro.err != nil || ro.class != credCurrent {
			wrongRot++
		}
	}
	fmt.Fprintf(w, "- Secret rotations (new ..data swapped in): %d; the next request carried the new value after %d of them", len(r.rotations), len(r.rotations)-wrongRot)
	for _, ro := range r.rotations {
		if ro.err != nil {
			fmt.Fprintf(w, "; a probe failed: %v", ro.err)
		} else if ro.class != credCurrent {
			fmt.Fprintf(w, "; a probe saw %s", ro.class)
		}
	}
	fmt.Fprintln(w, ".")
	var took []time.Duration
	failed := 0
	for _, re := range r.reloads {
		if re.err != nil {
			failed++
			continue
		}
		took = append(took, re.took)
	}
	fmt.Fprintf(w, "- Config swaps: %d, acted on by the proxy in median %.1f s, at most %.1f s (it polls every 2 s); %d not acted on within 30 s.\n",
		len(r.reloads), quantile(took, 0.5).Seconds(), quantile(took, 1).Seconds(), failed)
	fmt.Fprintf(w, "- The proxy's own count: reloads ok %v, reloads failed %v, injection failures %v, certificates minted %v.\n\n",
		metricLabelled(r.metrics, "keyhole_proxy_reloads_total", `result="ok"`), metricLabelled(r.metrics, "keyhole_proxy_reloads_total", `result="error"`),
		metricValue(r.metrics, "keyhole_proxy_injection_failures_total"), metricValue(r.metrics, "keyhole_proxy_cert_mints_total"))

	fmt.Fprintln(w, "## What the upstream saw")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| host | credential | requests |")
	fmt.Fprintln(w, "| --- | --- | ---: |")
	for _, k := range slices.Sorted(maps.Keys(r.upstream)) {
		host, class, _ := strings.Cut(k, " ")
		fmt.Fprintf(w, "| %s | %s | %d |\n", host, class, r.upstream[k])
	}
	fmt.Fprintln(w)

	fmt.Fprintln(w, "## Secrets in the proxy's log")
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%d lines (%d request lines, %d not JSON) searched for %d secret values, as written and in base64: %d lines hold one.\n\n",
		r.logScan.lines, r.logScan.requestLines, r.logScan.notJSON, r.logScan.secretsSearched, r.logScan.withSecret)
	if len(r.problems) > 0 {
		fmt.Fprintln(w, "## Problems")
		fmt.Fprintln(w)
		sort.Strings(r.problems)
		for _, p := range r.problems {
			fmt.Fprintf(w, "- %s\n", p)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Verdict: %s\n", map[bool]string{true: "clean", false: "PROBLEMS FOUND"}[r.clean()])
}

// metricLabelled sums one metric's samples whose labels contain label.
func metricLabelled(text, name, label string) float64 {
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name+"{") && strings.Contains(l, label) {
			lines = append(lines, l)
		}
	}
	return metricValue(strings.Join(lines, "\n"), name)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
func mib(kib int64) float64      { return float64(kib) / 1024 }

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
