package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// series is one figure measured once per run.
type series []float64

func (s series) median() float64 {
	if len(s) == 0 {
		return 0
	}
	c := append(series(nil), s...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

func (s series) String() string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strings.Join(parts, " ")
}

// results holds every run's figures, by measurement and route name.
type results struct {
	rps     map[string]series // keep-alive requests/s
	ratio   map[string]series // keep-alive requests/s as % of direct
	latency map[string]series // median µs on one warm connection
	added   map[string]series // latency minus direct, µs
	tunnels map[string]series // new tunnels/s
	// proxyCPU is the CPU time the proxy process spent per keep-alive
	// request (µs); upstreamCPU the upstream process's. Unlike rates,
	// these hardly depend on how busy the shared machine is.
	proxyCPU    map[string]series
	upstreamCPU map[string]series
	hwm         map[string]series // peak RSS with idle tunnels, MiB
	rss         map[string]series // RSS with idle tunnels, MiB
	opened      map[string]int    // idle tunnels opened in the last run
	// vsFloor are keyhole's figures over the terminating floor's in
	// the same run: the bound keyhole's own handling is measured against.
	vsFloor  map[string]series
	failures map[string]int64
	// upstreamRefused counts requests that reached the upstream without
	// the real token: nonzero means a contender did not inject.
	upstreamRefused int64
}

// Names of the vsFloor series.
const (
	floorCPU     = "proxy CPU per request, keyhole as % of floor"
	floorRPS     = "keep-alive req/s, keyhole as % of floor"
	floorTunnels = "new tunnels/s, keyhole as % of floor"
)

// addFloorRatios records run i's keyhole/floor ratios.
func (r *results) addFloorRatios(i int) {
	at := func(m map[string]series, name string) float64 {
		if i < len(m[name]) {
			return m[name][i]
		}
		return 0
	}
	if f := at(r.proxyCPU, nameFloor); f > 0 {
		r.vsFloor[floorCPU] = append(r.vsFloor[floorCPU], 100*at(r.proxyCPU, nameKeyhole)/f)
	}
	if f := at(r.rps, nameFloor); f > 0 {
		r.vsFloor[floorRPS] = append(r.vsFloor[floorRPS], 100*at(r.rps, nameKeyhole)/f)
	}
	if f := at(r.tunnels, nameFloor); f > 0 {
		r.vsFloor[floorTunnels] = append(r.vsFloor[floorTunnels], 100*at(r.tunnels, nameKeyhole)/f)
	}
}

func (r *results) fail(what string, n int64) {
	if n > 0 {
		r.failures[what] += n
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// print writes the medians as a Markdown table, then every run's figures.
func (r *results) print(w io.Writer, o options) {
	med := func(m map[string]series, name string) float64 { return m[name].median() }
	fmt.Fprintf(w, "keyhole-proxy vs direct HTTPS vs mitmproxy: loopback, %d B responses, %d runs, medians\n\n", bodySize, o.runs)
	fmt.Fprintln(w, "| measurement | keyhole | direct | mitmproxy | keyhole passthrough (control) | terminating floor (bound) | fast-path sketch (bound) | target | keyhole |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---|---|")
	fmt.Fprintf(w, "| keep-alive req/s, %d conns | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | | |\n", o.conns,
		med(r.rps, nameKeyhole), med(r.rps, nameDirect), med(r.rps, nameMitm), med(r.rps, nameTunnel), med(r.rps, nameFloor), med(r.rps, nameSketch))
	fmt.Fprintf(w, "| keep-alive, %% of direct (median of per-run ratios) | %.0f%% | 100%% | %.0f%% | %.0f%% | %.0f%% | %.0f%% | >= 50%% | %s |\n",
		med(r.ratio, nameKeyhole), med(r.ratio, nameMitm), med(r.ratio, nameTunnel), med(r.ratio, nameFloor), med(r.ratio, nameSketch), verdict(med(r.ratio, nameKeyhole) >= 50))
	fmt.Fprintf(w, "| proxy CPU per keep-alive request (µs) | %.0f | | %.0f | %.0f | %.0f | %.0f | | |\n",
		med(r.proxyCPU, nameKeyhole), med(r.proxyCPU, nameMitm), med(r.proxyCPU, nameTunnel), med(r.proxyCPU, nameFloor), med(r.proxyCPU, nameSketch))
	fmt.Fprintf(w, "| upstream CPU per keep-alive request (µs) | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | | |\n",
		med(r.upstreamCPU, nameKeyhole), med(r.upstreamCPU, nameDirect), med(r.upstreamCPU, nameMitm), med(r.upstreamCPU, nameTunnel), med(r.upstreamCPU, nameFloor), med(r.upstreamCPU, nameSketch))
	fmt.Fprintf(w, "| median latency, 1 conn (µs) | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | | |\n",
		med(r.latency, nameKeyhole), med(r.latency, nameDirect), med(r.latency, nameMitm), med(r.latency, nameTunnel), med(r.latency, nameFloor), med(r.latency, nameSketch))
	fmt.Fprintf(w, "| added median latency (µs) | %.0f | 0 | %.0f | %.0f | %.0f | %.0f | < 500 | %s |\n",
		med(r.added, nameKeyhole), med(r.added, nameMitm), med(r.added, nameTunnel), med(r.added, nameFloor), med(r.added, nameSketch), verdict(med(r.added, nameKeyhole) < 500))
	fmt.Fprintf(w, "| new tunnels/s, %d clients | %.0f | | %.0f | %.0f | %.0f | | >= 400 | %s |\n", o.tunnelers,
		med(r.tunnels, nameKeyhole), med(r.tunnels, nameMitm), med(r.tunnels, nameTunnel), med(r.tunnels, nameFloor), verdict(med(r.tunnels, nameKeyhole) >= 400))
	if o.idle > 0 {
		fmt.Fprintf(w, "| peak RSS (VmHWM), %d idle tunnels (MiB) | %.1f | | %.1f | | | | < 100 | %s |\n", o.idle,
			med(r.hwm, nameKeyhole), med(r.hwm, nameMitm), verdict(med(r.hwm, nameKeyhole) < 100 && r.opened[nameKeyhole] == o.idle))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "keyhole against the terminating floor, medians of per-run ratios:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| measurement | keyhole | target | keyhole |")
	fmt.Fprintln(w, "|---|---:|---|---|")
	fmt.Fprintf(w, "| %s | %.0f%% | <= 130%% | %s |\n", floorCPU, med(r.vsFloor, floorCPU), verdict(med(r.vsFloor, floorCPU) <= 130))
	fmt.Fprintf(w, "| %s | %.0f%% | >= 85%% | %s |\n", floorRPS, med(r.vsFloor, floorRPS), verdict(med(r.vsFloor, floorRPS) >= 85))
	fmt.Fprintf(w, "| added median latency, keyhole (µs) | %.0f | <= 100 | %s |\n", med(r.added, nameKeyhole), verdict(med(r.added, nameKeyhole) <= 100))
	fmt.Fprintf(w, "| %s | %.0f%% | >= 100%% | %s |\n", floorTunnels, med(r.vsFloor, floorTunnels), verdict(med(r.vsFloor, floorTunnels) >= 100))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "per run:")
	for _, m := range []struct {
		what string
		m    map[string]series
	}{
		{"keep-alive req/s", r.rps}, {"keep-alive % of direct", r.ratio}, {"latency µs", r.latency},
		{"added latency µs", r.added}, {"proxy CPU µs/request", r.proxyCPU}, {"upstream CPU µs/request", r.upstreamCPU},
		{"new tunnels/s", r.tunnels}, {"idle VmHWM MiB", r.hwm}, {"idle VmRSS MiB", r.rss}, {"vs floor", r.vsFloor},
	} {
		for _, name := range []string{nameDirect, nameKeyhole, nameMitm, nameTunnel, nameFloor, nameSketch, floorCPU, floorRPS, floorTunnels} {
			if len(m.m[name]) > 0 {
				fmt.Fprintf(w, "  %-24s %-20s %s\n", m.what, name, m.m[name])
			}
		}
	}
	if o.idle > 0 {
		fmt.Fprintf(w, "  idle tunnels opened: keyhole %d/%d, mitmproxy %d/%d\n", r.opened[nameKeyhole], o.idle, r.opened[nameMitm], o.idle)
	}
	keys := make([]string, 0, len(r.failures))
	for k := range r.failures {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "  failed requests, %s: %d\n", k, r.failures[k])
	}
	fmt.Fprintf(w, "  requests the upstream refused for a missing token: %d\n", r.upstreamRefused)
}
