package proxy

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

// otherHost is the host label of requests to hosts the config does not
// name, so that a sandbox cannot grow the metrics without bound by
// CONNECTing to random names.
const otherHost = "_other"

// latencyBuckets returns the upper bounds, in seconds, of the upstream
// latency histogram: loopback sub-millisecond up to slow APIs.
func latencyBuckets() []float64 {
	return []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
}

// metrics is the proxy's counters, exposed in the Prometheus text format
// written by hand (the standard library has no client, and a dependency
// for five series is not worth it).
type metrics struct {
	mu             sync.Mutex
	requests       map[[3]string]uint64 // host, decision, reason
	injectFailures map[string]uint64    // host
	tokenMints     map[[2]string]uint64 // connection, result
	scrubs         map[[2]string]uint64 // host, where
	reloads        map[[2]string]uint64 // what, result
	transparents   map[[2]string]uint64 // decision, reason
	dialsRefused   map[[2]string]uint64 // host, class
	dnsQueries     map[[2]string]uint64 // decision, reason
	upProxy        map[string]uint64    // result
	audits         map[[3]string]uint64 // host, connection, reason
	latencyBounds  []float64
	latencyCounts  []uint64 // one per bound, then +Inf
	latencySum     float64
	latencyCount   uint64

	mints   atomic.Uint64
	tunnels atomic.Int64

	// goroutines counts the process's goroutines: a gauge that stays
	// flat under steady load and grows when something leaks.
	goroutines func() int
	// otlp, when the request log is exported, counts its records.
	otlp func() (exported, dropped, failed uint64)
}

func newMetrics() *metrics {
	b := latencyBuckets()
	return &metrics{
		requests: map[[3]string]uint64{}, injectFailures: map[string]uint64{}, tokenMints: map[[2]string]uint64{}, scrubs: map[[2]string]uint64{}, reloads: map[[2]string]uint64{}, transparents: map[[2]string]uint64{},
		dialsRefused: map[[2]string]uint64{}, dnsQueries: map[[2]string]uint64{}, upProxy: map[string]uint64{}, audits: map[[3]string]uint64{},
		latencyBounds: b, latencyCounts: make([]uint64, len(b)+1),
		goroutines: runtime.NumGoroutine,
	}
}

func (m *metrics) request(host string, d policy.Decision) {
	m.mu.Lock()
	m.requests[[3]string{host, string(d.Action), string(d.Reason)}]++
	m.mu.Unlock()
}

// transparent counts a redirected connection's decision; the request
// counter counts it too, by host.
func (m *metrics) transparent(d policy.Decision) {
	m.mu.Lock()
	m.transparents[[2]string{string(d.Action), string(d.Reason)}]++
	m.mu.Unlock()
}

// dialRefused counts a dial refused for its address's class; the host
// is a configured one (only allowed hosts are dialled).
func (m *metrics) dialRefused(host string, class policy.AddrClass) {
	m.mu.Lock()
	m.dialsRefused[[2]string{host, string(class)}]++
	m.mu.Unlock()
}

// dns counts a DNS message's decision: refused names among them.
func (m *metrics) dns(d DNSDecision) {
	m.mu.Lock()
	m.dnsQueries[[2]string{string(d.Action), string(d.Reason)}]++
	m.mu.Unlock()
}

// audited counts a request forwarded without the credential in audit
// mode, by the reason it would have been refused for.
func (m *metrics) audited(host, connection, reason string) {
	m.mu.Lock()
	m.audits[[3]string{host, connection, reason}]++
	m.mu.Unlock()
}

// upstreamProxy counts a tunnel asked of the upstream proxy by result.
func (m *metrics) upstreamProxy(result string) {
	m.mu.Lock()
	m.upProxy[result]++
	m.mu.Unlock()
}

func (m *metrics) injectFailure(host string) {
	m.mu.Lock()
	m.injectFailures[host]++
	m.mu.Unlock()
}

// tokenMint counts a credential the proxy minted ("ok") or failed to
// ("error") for a Connection.
func (m *metrics) tokenMint(connection, result string) {
	m.mu.Lock()
	m.tokenMints[[2]string{connection, result}]++
	m.mu.Unlock()
}

func (m *metrics) scrubbed(host, where string) {
	m.mu.Lock()
	m.scrubs[[2]string{host, where}]++
	m.mu.Unlock()
}

func (m *metrics) reload(what string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.mu.Lock()
	m.reloads[[2]string{what, result}]++
	m.mu.Unlock()
}

func (m *metrics) observeUpstream(d time.Duration) {
	s := d.Seconds()
	i, _ := slices.BinarySearch(m.latencyBounds, s)
	m.mu.Lock()
	m.latencyCounts[i]++
	m.latencySum += s
	m.latencyCount++
	m.mu.Unlock()
}

// write renders every series, sorted, so two scrapes of the same state
// are byte-identical.
func (m *metrics) write(w io.Writer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	counterFamily(&b, "keyhole_proxy_requests_total", "Requests the proxy decided, by host, decision and reason.", m.requests, threeLabels, "host", "decision", "reason")
	counterFamily(&b, "keyhole_proxy_audited_total", "Requests the rules refuse that audit mode forwarded without the credential, by host, connection and reason.", m.audits, threeLabels, "host", "connection", "reason")
	counterFamily(&b, "keyhole_proxy_transparent_connections_total", "Connections redirected to the transparent listener, by decision and reason.", m.transparents, twoLabels, "decision", "reason")
	counterFamily(&b, "keyhole_proxy_injection_failures_total", "Requests refused because a credential could not be read.", m.injectFailures, oneLabel, "host")
	counterFamily(&b, "keyhole_proxy_token_mints_total", "Credentials the proxy minted (GitHub App installation tokens), by connection and result (ok, error).", m.tokenMints, twoLabels, "connection", "result")
	counterFamily(&b, "keyhole_proxy_dials_refused_total", "Upstream dials refused because the host resolved to an internal address, by host and address class.", m.dialsRefused, twoLabels, "host", "class")
	counterFamily(&b, "keyhole_proxy_upstream_proxy_connects_total", "Tunnels asked of the configured upstream proxy, by result (ok, or why it failed).", m.upProxy, oneLabel, "result")
	counterFamily(&b, "keyhole_proxy_dns_queries_total", "DNS messages the proxy's DNS listener decided, by decision (answer, refuse, drop) and reason.", m.dnsQueries, twoLabels, "decision", "reason")
	counterFamily(&b, "keyhole_proxy_response_scrubs_total", "Upstream responses whose headers held the injected credential, redacted, by host and part (interim, header, trailer).", m.scrubs, twoLabels, "host", "where")
	b.WriteString("# HELP keyhole_proxy_cert_mints_total Leaf certificates minted for injected hosts.\n")
	b.WriteString("# TYPE keyhole_proxy_cert_mints_total counter\n")
	fmt.Fprintf(&b, "keyhole_proxy_cert_mints_total %d\n", m.mints.Load())
	b.WriteString("# HELP keyhole_proxy_tunnels_active CONNECT tunnels open now.\n")
	b.WriteString("# TYPE keyhole_proxy_tunnels_active gauge\n")
	fmt.Fprintf(&b, "keyhole_proxy_tunnels_active %d\n", m.tunnels.Load())
	b.WriteString("# HELP keyhole_proxy_goroutines Goroutines in the proxy process now.\n")
	b.WriteString("# TYPE keyhole_proxy_goroutines gauge\n")
	fmt.Fprintf(&b, "keyhole_proxy_goroutines %d\n", m.goroutines())
	counterFamily(&b, "keyhole_proxy_reloads_total", "Config and CA reload attempts, by what and result.", m.reloads, twoLabels, "what", "result")
	if m.otlp != nil {
		exported, dropped, failed := m.otlp()
		b.WriteString("# HELP keyhole_proxy_otlp_log_records_total Request log records for the OTLP collector, by result: exported, dropped (the queue was full), failed (the export failed).\n")
		b.WriteString("# TYPE keyhole_proxy_otlp_log_records_total counter\n")
		fmt.Fprintf(&b, "keyhole_proxy_otlp_log_records_total{result=\"dropped\"} %d\n", dropped)
		fmt.Fprintf(&b, "keyhole_proxy_otlp_log_records_total{result=\"exported\"} %d\n", exported)
		fmt.Fprintf(&b, "keyhole_proxy_otlp_log_records_total{result=\"failed\"} %d\n", failed)
	}
	b.WriteString("# HELP keyhole_proxy_upstream_latency_seconds Time from sending a request upstream to its response headers.\n")
	b.WriteString("# TYPE keyhole_proxy_upstream_latency_seconds histogram\n")
	var cum uint64
	for i, le := range m.latencyBounds {
		cum += m.latencyCounts[i]
		fmt.Fprintf(&b, "keyhole_proxy_upstream_latency_seconds_bucket{le=\"%s\"} %d\n", strconv.FormatFloat(le, 'g', -1, 64), cum)
	}
	cum += m.latencyCounts[len(m.latencyBounds)]
	fmt.Fprintf(&b, "keyhole_proxy_upstream_latency_seconds_bucket{le=\"+Inf\"} %d\n", cum)
	fmt.Fprintf(&b, "keyhole_proxy_upstream_latency_seconds_sum %s\n", strconv.FormatFloat(m.latencySum, 'g', -1, 64))
	fmt.Fprintf(&b, "keyhole_proxy_upstream_latency_seconds_count %d\n", m.latencyCount)
	io.WriteString(w, b.String())
}

// counterFamily writes the counter family name, one series per key of m
// in the order of their label values (values), labelled with labels.
func counterFamily[K comparable](b *strings.Builder, name, help string, m map[K]uint64, values func(K) []string, labels ...string) {
	b.WriteString("# HELP " + name + " " + help + "\n")
	b.WriteString("# TYPE " + name + " counter\n")
	for _, k := range sortedKeys(m, func(k K) string { return strings.Join(values(k), "\x00") }) {
		b.WriteString(name)
		sep := "{"
		for i, v := range values(k) {
			b.WriteString(sep + labels[i] + "=" + q(v))
			sep = ","
		}
		fmt.Fprintf(b, "} %d\n", m[k])
	}
}

func oneLabel(k string) []string       { return []string{k} }
func twoLabels(k [2]string) []string   { return k[:] }
func threeLabels(k [3]string) []string { return k[:] }

func sortedKeys[K comparable, V any](m map[K]V, str func(K) string) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(str(a), str(b)) })
	return keys
}

// q quotes a label value as the text format wants: backslash, quote and
// newline escaped.
func q(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)
	return `"` + r.Replace(s) + `"`
}
