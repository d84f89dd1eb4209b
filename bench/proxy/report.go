package main

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// series is one figure measured once per run; NaN marks a run whose
// measurement failed, so that the figures of one run keep one index
// across routes.
type series []float64

// median is the median of the figures that are not NaN; NaN for none.
func (s series) median() float64 {
	c := make([]float64, 0, len(s))
	for _, v := range s {
		if !math.IsNaN(v) {
			c = append(c, v)
		}
	}
	if len(c) == 0 {
		return math.NaN()
	}
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func (s series) String() string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatFloat(v, 'f', precision(v), 64)
	}
	return strings.Join(parts, " ")
}

// precision shows small figures (ratios, MiB) with decimals.
func precision(v float64) int {
	switch a := math.Abs(v); {
	case a < 10:
		return 2
	case a < 100:
		return 1
	}
	return 0
}

// ratio is a[i]/b[i] for each run both measured, times scale.
func ratio(a, b series, scale float64) series {
	var out series
	for i := 0; i < len(a) && i < len(b); i++ {
		if b[i] == 0 || math.IsNaN(a[i]) || math.IsNaN(b[i]) {
			out = append(out, math.NaN())
			continue
		}
		out = append(out, scale*a[i]/b[i])
	}
	return out
}

// diff is a[i]-b[i] for each run both measured.
func diff(a, b series) series {
	var out series
	for i := 0; i < len(a) && i < len(b); i++ {
		out = append(out, a[i]-b[i])
	}
	return out
}

// metric names a figure measured per run and route.
type metric string

// The figures, as the tables name them.
const (
	mRPS         metric = "keep-alive req/s"
	mOfDirect    metric = "keep-alive, % of direct (median of per-run ratios)"
	mProxyCPU    metric = "proxy CPU per keep-alive request (µs)"
	mUpCPU       metric = "upstream CPU per keep-alive request (µs)"
	mLatency     metric = "median latency, 1 conn (µs)"
	mAdded       metric = "added median latency (µs)"
	mP50         metric = "keep-alive latency p50 (µs)"
	mP99         metric = "keep-alive latency p99 (µs)"
	mRPSHigh     metric = "keep-alive req/s, many conns"
	mP50High     metric = "keep-alive latency p50, many conns (µs)"
	mP99High     metric = "keep-alive latency p99, many conns (µs)"
	mTunnels     metric = "new tunnels/s"
	mGRPC        metric = "gRPC unary calls/s"
	mGRPCOf      metric = "gRPC unary calls, % of direct (median of per-run ratios)"
	mGRPCP50     metric = "gRPC unary latency p50 (µs)"
	mGRPCP99     metric = "gRPC unary latency p99 (µs)"
	mWS          metric = "WebSocket round trips/s"
	mWSOf        metric = "WebSocket round trips, % of direct (median of per-run ratios)"
	mWSP50       metric = "WebSocket round trip p50 (µs)"
	mWSP99       metric = "WebSocket round trip p99 (µs)"
	mStreamP50   metric = "event delay p50 (µs)"
	mStreamP99   metric = "event delay p99 (µs)"
	mStreamAdded metric = "event delay p99 less direct's (µs)"
	mEvents      metric = "events read"
	mLate        metric = "events later than one interval"
	mDownload    metric = "download (MiB/s)"
	mUpload      metric = "upload (MiB/s)"
	mCPUDown     metric = "proxy CPU per MiB downloaded (ms)"
	mCPUUp       metric = "proxy CPU per MiB uploaded (ms)"
	mRest        metric = "proxy RSS at rest before the transfers (MiB)"
	mPeakDown    metric = "proxy peak RSS during the download (MiB)"
	mPeakUp      metric = "proxy peak RSS during the upload (MiB)"
	mGrowDown    metric = "growth during the download (MiB)"
	mGrowUp      metric = "growth during the upload (MiB)"
	mFresh       metric = "RSS of a fresh proxy, no tunnels (MiB)"
	mPerIdle     metric = "RSS per idle tunnel (KiB)"
	mPerBusy     metric = "RSS per busy tunnel (KiB)"
	mHWM         metric = "peak RSS (VmHWM) with idle tunnels (MiB)"
	mIdleRSS     metric = "RSS (VmRSS) with idle tunnels (MiB)"
	mBusyRSS     metric = "peak RSS with busy tunnels (MiB)"
	// Against the terminating floor, per run.
	mFloorCPU      metric = "proxy CPU per keep-alive request, % of the floor's"
	mFloorRPS      metric = "keep-alive req/s, % of the floor's"
	mFloorTunnels  metric = "new tunnels/s, % of the floor's"
	mFloorDownload metric = "download MiB/s, % of the floor's"
	mFloorUpload   metric = "upload MiB/s, % of the floor's"
	mFloorCPUDown  metric = "proxy CPU per MiB downloaded, % of the floor's"
	mFloorCPUUp    metric = "proxy CPU per MiB uploaded, % of the floor's"
)

// results holds every run's figures, by metric and route name.
type results struct {
	v      map[metric]map[string]series
	opened map[string]int // idle tunnels opened in the last run
	// failures counts failed requests (and failed streams and
	// transfers) by what failed.
	failures map[string]int64
	// upstreamRefused counts requests that reached the upstream without
	// the real token: nonzero means a contender did not inject.
	upstreamRefused int64
}

func newResults() *results {
	return &results{v: map[metric]map[string]series{}, opened: map[string]int{}, failures: map[string]int64{}}
}

func (r *results) add(m metric, route string, v float64) {
	if r.v[m] == nil {
		r.v[m] = map[string]series{}
	}
	r.v[m][route] = append(r.v[m][route], v)
}

func (r *results) get(m metric, route string) series { return r.v[m][route] }

func (r *results) set(m metric, route string, s series) {
	if len(s) == 0 {
		return
	}
	if r.v[m] == nil {
		r.v[m] = map[string]series{}
	}
	r.v[m][route] = s
}

func (r *results) fail(what string, n int64) {
	if n > 0 {
		r.failures[what] += n
	}
}

// derive computes the per-run figures that compare routes: against
// direct and against the floor.
func (r *results) derive(builds []string, all []string) {
	for _, name := range all {
		r.set(mOfDirect, name, ratio(r.get(mRPS, name), r.get(mRPS, nameDirect), 100))
		r.set(mGRPCOf, name, ratio(r.get(mGRPC, name), r.get(mGRPC, nameDirect), 100))
		r.set(mWSOf, name, ratio(r.get(mWS, name), r.get(mWS, nameDirect), 100))
		r.set(mAdded, name, diff(r.get(mLatency, name), r.get(mLatency, nameDirect)))
		r.set(mStreamAdded, name, diff(r.get(mStreamP99, name), r.get(mStreamP99, nameDirect)))
		r.set(mGrowDown, name, diff(r.get(mPeakDown, name), r.get(mRest, name)))
		r.set(mGrowUp, name, diff(r.get(mPeakUp, name), r.get(mRest, name)))
	}
	for _, name := range builds {
		for _, f := range []struct{ out, in metric }{
			{mFloorCPU, mProxyCPU}, {mFloorRPS, mRPS}, {mFloorTunnels, mTunnels},
			{mFloorDownload, mDownload}, {mFloorUpload, mUpload},
			{mFloorCPUDown, mCPUDown}, {mFloorCPUUp, mCPUUp},
		} {
			r.set(f.out, name, ratio(r.get(f.in, name), r.get(f.in, nameFloor), 100))
		}
	}
}

// row is one line of a table: a metric, the target keyhole's median is
// held to (when there is one), and whether it is met.
type row struct {
	m      metric
	label  string // the metric's name when empty
	target string
	met    func(float64) bool
}

// table prints rows for the routes cols, with a column of the per-run
// ratio keyhole/base after base's when base is set.
func (r *results) table(w io.Writer, cols []string, base string, rows []row) {
	head := "| measurement |"
	line := "|---|"
	for _, c := range cols {
		head += " " + c + " |"
		line += "---:|"
		if c == base && base != "" {
			head += " keyhole / " + strings.TrimSuffix(strings.TrimPrefix(base, "keyhole ("), ")") + " |"
			line += "---:|"
		}
	}
	fmt.Fprintln(w, head+" target | keyhole |")
	fmt.Fprintln(w, line+"---|---|")
	for _, rw := range rows {
		label := rw.label
		if label == "" {
			label = string(rw.m)
		}
		out := "| " + label + " |"
		for _, c := range cols {
			out += " " + cell(r.get(rw.m, c).median()) + " |"
			if c == base && base != "" {
				out += " " + cell(ratio(r.get(rw.m, nameKeyhole), r.get(rw.m, base), 1).median()) + " |"
			}
		}
		v := ""
		if rw.met != nil && len(r.get(rw.m, nameKeyhole)) > 0 {
			v = verdict(rw.met(r.get(rw.m, nameKeyhole).median()))
		}
		fmt.Fprintf(w, "%s %s | %s |\n", out, rw.target, v)
	}
	fmt.Fprintln(w)
}

func cell(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return strconv.FormatFloat(v, 'f', precision(v), 64)
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// print writes the medians as Markdown tables, then every run's figures.
func (r *results) print(w io.Writer, o options) {
	base := o.baseName()
	builds := []string{nameKeyhole}
	if base != "" {
		builds = append(builds, base)
	}
	all := append(append([]string{}, builds...), nameDirect, nameMitm, nameTunnel, nameFloor, nameSketch)
	streamCols := append(append([]string{}, builds...), nameDirect, nameMitm, nameFloor)
	r.derive(builds, all)
	lt := func(x float64) func(float64) bool { return func(v float64) bool { return v < x } }
	le := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	ge := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }

	fmt.Fprintf(w, "keyhole-proxy vs direct HTTPS vs mitmproxy: loopback, %d runs, medians (ratios: medians of per-run ratios)\n\n", o.runs)
	fmt.Fprintf(w, "Keep-alive (%d B responses, %d and %d conns), latency, new tunnels:\n\n", bodySize, o.conns, o.connsHigh)
	r.table(w, all, base, []row{
		{m: mRPS, label: fmt.Sprintf("keep-alive req/s, %d conns", o.conns)},
		{m: mOfDirect, target: ">= 50%", met: ge(50)},
		{m: mProxyCPU},
		{m: mUpCPU},
		{m: mLatency},
		{m: mAdded, target: "< 500", met: lt(500)},
		{m: mP50, label: fmt.Sprintf("latency p50, %d conns (µs)", o.conns)},
		{m: mP99, label: fmt.Sprintf("latency p99, %d conns (µs)", o.conns)},
		{m: mRPSHigh, label: fmt.Sprintf("keep-alive req/s, %d conns", o.connsHigh)},
		{m: mP50High, label: fmt.Sprintf("latency p50, %d conns (µs)", o.connsHigh)},
		{m: mP99High, label: fmt.Sprintf("latency p99, %d conns (µs)", o.connsHigh)},
		{m: mTunnels, label: fmt.Sprintf("new tunnels/s, %d clients", o.tunnelers), target: ">= 400", met: ge(400)},
	})

	fmt.Fprintf(w, "gRPC: unary health Check calls, %d at once on one HTTP/2 connection, credential injected (keyhole speaks HTTP/2 to the client and the upstream):\n\n", o.conns)
	r.table(w, append(append([]string{}, builds...), nameDirect), base, []row{
		{m: mGRPC},
		{m: mGRPCOf},
		{m: mGRPCP50},
		{m: mGRPCP99},
	})

	if o.wsMessages > 0 {
		fmt.Fprintf(w, "WebSocket: %d round trips of a %d-byte text message, one after the other on one WebSocket, credential injected in the handshake (keyhole relays frames and scrubs the upstream's messages):\n\n", o.wsMessages, wsMessageSize)
		r.table(w, append(append([]string{}, builds...), nameDirect), base, []row{
			{m: mWS},
			{m: mWSOf},
			{m: mWSP50},
			{m: mWSP99},
		})
	}

	fmt.Fprintln(w, "Against the terminating floor, per run:")
	fmt.Fprintln(w)
	vs := []row{
		{m: mFloorCPU, target: "<= 130%", met: le(130)},
		{m: mFloorCPU, label: "the same, against the budget", target: "<= 260% (budget)", met: le(260)},
		{m: mFloorRPS, target: ">= 85%", met: ge(85)},
		{m: mAdded, target: "<= 100", met: le(100)},
		{m: mFloorTunnels, target: ">= 100%", met: ge(100)},
	}
	if o.bulk > 0 {
		vs = append(vs, row{m: mFloorDownload, target: ">= 90%", met: ge(90)}, row{m: mFloorUpload, target: ">= 90%", met: ge(90)},
			row{m: mFloorCPUDown}, row{m: mFloorCPUUp})
	}
	r.table(w, builds, base, vs)

	if o.streamDuration > 0 {
		fmt.Fprintf(w, "Server-Sent Events: one %d B event every %v for %v, credential injected, response bodies scrubbed; delay from the upstream's write to the client's read:\n\n",
			eventSize, streamInterval, o.streamDuration)
		r.table(w, streamCols, base, []row{
			{m: mStreamP50},
			{m: mStreamP99},
			{m: mStreamAdded, target: "<= 1000", met: le(1000)},
			{m: mEvents, label: "events read per stream"},
			{m: mLate, label: fmt.Sprintf("events delayed %v or more (held until the next would show here)", streamInterval)},
		})
	}
	if o.bulk > 0 {
		fmt.Fprintf(w, "Bulk: a %d MiB download and a %d MiB upload (PUT), credential injected, response bodies scrubbed:\n\n", o.bulk, o.upload)
		r.table(w, streamCols, base, []row{
			{m: mDownload},
			{m: mUpload},
			{m: mCPUDown},
			{m: mCPUUp},
			{m: mRest},
			{m: mPeakDown},
			{m: mPeakUp},
			{m: mGrowDown, target: "< 8 (flat)", met: lt(8)},
			{m: mGrowUp, target: "< 8 (flat)", met: lt(8)},
		})
	}
	if o.idle > 0 {
		fmt.Fprintf(w, "Memory: fresh processes, %d idle tunnels, %d busy keep-alive tunnels:\n\n", o.idle, o.connsHigh)
		r.table(w, append(append([]string{}, builds...), nameMitm), base, []row{
			{m: mFresh, target: "<= 20", met: le(20)},
			{m: mPerIdle},
			{m: mPerBusy},
			{m: mHWM, label: fmt.Sprintf("peak RSS (VmHWM), %d idle tunnels (MiB)", o.idle), target: "< 100", met: func(v float64) bool { return v < 100 && r.opened[nameKeyhole] == o.idle }},
			{m: mBusyRSS},
		})
	}

	fmt.Fprintln(w, "per run:")
	ms := make([]string, 0, len(r.v))
	for m := range r.v {
		ms = append(ms, string(m))
	}
	sort.Strings(ms)
	for _, m := range ms {
		names := make([]string, 0, len(r.v[metric(m)]))
		for n := range r.v[metric(m)] {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(w, "  %-52s %-20s %s\n", m, n, r.v[metric(m)][n])
		}
	}
	if o.idle > 0 {
		for _, n := range append(builds, nameMitm) {
			fmt.Fprintf(w, "  idle tunnels opened, %s: %d/%d\n", n, r.opened[n], o.idle)
		}
	}
	keys := make([]string, 0, len(r.failures))
	for k := range r.failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  failed, %s: %d\n", k, r.failures[k])
	}
	fmt.Fprintf(w, "  requests the upstream refused for a missing token: %d\n", r.upstreamRefused)
}
