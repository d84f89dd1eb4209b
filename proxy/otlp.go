package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The request log goes, beside the JSON lines, to an OpenTelemetry
// collector as OTLP/HTTP logs when the standard OTEL_EXPORTER_OTLP_*
// variables name one (docs/proxy.md, "The request log over OTLP"). The
// encoder is written here, to the OTLP/HTTP JSON encoding, rather than
// taken from go.opentelemetry.io/otel's log exporter and SDK: linked into
// keyhole-proxy those grew the binary from 13.9 MB to 23.7 MB and its RSS
// at rest from 10.9 to 18.1 MiB, most of a sidecar's 20 MiB, for what is
// one POST of a small JSON document. TestOTLPDecodesAsTheCollector holds
// what it sends to the collector's own decoder.

// OTLPConfig configures the request log's OTLP export. Read it from the
// environment with OTLPConfigFromEnv.
type OTLPConfig struct {
	// Endpoint is the full URL logs are POSTed to (…/v1/logs).
	Endpoint string
	// Headers are sent with every export (a collector's API key); their
	// values are never logged.
	Headers map[string]string
	// Timeout bounds one export.
	Timeout time.Duration
	// Roots verify an https endpoint; nil means the system roots.
	Roots *x509.CertPool
	// Resource are the resource's attributes, service.name among them.
	Resource [][2]string
	// QueueSize bounds the records waiting to be sent; a record that
	// finds it full is dropped and counted, never waited for.
	QueueSize int
	// BatchSize is the most records one export carries.
	BatchSize int
	// Delay is the longest a record waits for its batch to fill.
	Delay time.Duration
}

// The defaults, the OpenTelemetry batch log record processor's.
const (
	otlpDefaultQueue   = 2048
	otlpDefaultBatch   = 512
	otlpDefaultDelay   = time.Second
	otlpDefaultTimeout = 10 * time.Second
)

// ErrOTLPConfig is wrapped by every problem OTLPConfigFromEnv finds.
var ErrOTLPConfig = errors.New("invalid OTLP export settings")

// OTLPConfigFromEnv reads the OpenTelemetry exporter variables through
// getenv: OTEL_EXPORTER_OTLP_LOGS_ENDPOINT (used as is) or
// OTEL_EXPORTER_OTLP_ENDPOINT (with /v1/logs appended), the _HEADERS,
// _TIMEOUT, _PROTOCOL and _CERTIFICATE variables in both forms (the
// logs one first), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES and the
// batch processor's OTEL_BLRP_MAX_QUEUE_SIZE, OTEL_BLRP_MAX_EXPORT_BATCH_SIZE
// and OTEL_BLRP_SCHEDULE_DELAY. It returns nil when no endpoint is set,
// or OTEL_LOGS_EXPORTER is "none". Errors name the variable, never a
// header's value.
func OTLPConfigFromEnv(getenv func(string) string) (*OTLPConfig, error) {
	get := func(name string) (string, string) {
		if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_LOGS_" + name)); v != "" {
			return v, "OTEL_EXPORTER_OTLP_LOGS_" + name
		}
		return strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_" + name)), "OTEL_EXPORTER_OTLP_" + name
	}
	if e := strings.TrimSpace(getenv("OTEL_LOGS_EXPORTER")); e == "none" {
		return nil, nil
	} else if e != "" && e != "otlp" {
		return nil, fmt.Errorf("%w: OTEL_LOGS_EXPORTER is %q; keyhole-proxy exports to otlp or none", ErrOTLPConfig, e)
	}
	c := &OTLPConfig{Headers: map[string]string{}, Timeout: otlpDefaultTimeout, QueueSize: otlpDefaultQueue, BatchSize: otlpDefaultBatch, Delay: otlpDefaultDelay}
	if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT")); v != "" {
		c.Endpoint = v
	} else if v := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT")); v != "" {
		c.Endpoint = strings.TrimSuffix(v, "/") + "/v1/logs"
	} else {
		return nil, nil
	}
	u, err := url.Parse(c.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fmt.Errorf("%w: the OTLP logs endpoint is not an http:// or https:// URL without user information", ErrOTLPConfig)
	}
	if v, name := get("PROTOCOL"); v != "" && v != "http/json" {
		return nil, fmt.Errorf("%w: %s is %q; keyhole-proxy sends OTLP/HTTP JSON only: set it to http/json (a collector's OTLP/HTTP receiver takes both encodings)", ErrOTLPConfig, name, v)
	}
	if v, name := get("HEADERS"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, val, ok := strings.Cut(kv, "=")
			k = strings.TrimSpace(k)
			dec, err := url.PathUnescape(strings.TrimSpace(val))
			if !ok || k == "" || !isHeaderToken(k) || err != nil || strings.ContainsAny(dec, "\r\n\x00") {
				return nil, fmt.Errorf("%w: %s is not a list of key=value pairs with URL-encoded values (the entry for %q)", ErrOTLPConfig, name, clipName(k))
			}
			c.Headers[k] = dec
		}
	}
	if v, name := get("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%w: %s is %q, not a positive number of milliseconds", ErrOTLPConfig, name, v)
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	if v, name := get("CERTIFICATE"); v != "" {
		pem, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrOTLPConfig, name, err)
		}
		c.Roots = x509.NewCertPool()
		if !c.Roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: %s: %s holds no PEM certificate", ErrOTLPConfig, name, v)
		}
	}
	for _, n := range []struct {
		name string
		to   *int
	}{{"OTEL_BLRP_MAX_QUEUE_SIZE", &c.QueueSize}, {"OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", &c.BatchSize}} {
		if v := strings.TrimSpace(getenv(n.name)); v != "" {
			i, err := strconv.Atoi(v)
			if err != nil || i <= 0 || i > 1<<20 {
				return nil, fmt.Errorf("%w: %s is %q, not a number from 1 to %d", ErrOTLPConfig, n.name, v, 1<<20)
			}
			*n.to = i
		}
	}
	c.BatchSize = min(c.BatchSize, c.QueueSize)
	if v := strings.TrimSpace(getenv("OTEL_BLRP_SCHEDULE_DELAY")); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("%w: OTEL_BLRP_SCHEDULE_DELAY is %q, not a positive number of milliseconds", ErrOTLPConfig, v)
		}
		c.Delay = time.Duration(ms) * time.Millisecond
	}
	service := "keyhole-proxy"
	for _, kv := range strings.Split(getenv("OTEL_RESOURCE_ATTRIBUTES"), ",") {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			continue
		}
		dec, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%w: OTEL_RESOURCE_ATTRIBUTES: the value of %q is not URL-encoded", ErrOTLPConfig, clipName(k))
		}
		if k == "service.name" {
			service = dec
			continue
		}
		c.Resource = append(c.Resource, [2]string{k, dec})
	}
	if v := strings.TrimSpace(getenv("OTEL_SERVICE_NAME")); v != "" {
		service = v
	}
	c.Resource = append([][2]string{{"service.name", service}}, c.Resource...)
	return c, nil
}

// Origin is the endpoint's scheme and host, which the proxy logs at
// startup; its path and query are not logged.
func (c *OTLPConfig) Origin() string {
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func isHeaderToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return s != ""
}

// clipName cuts a name quoted in an error to 64 bytes.
func clipName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// otlpRecord is one request line waiting to be sent.
type otlpRecord struct {
	t time.Time
	f requestFields
}

// otlpExporter batches request lines and POSTs them to the collector.
// add never blocks: a full queue drops the record and counts it. One
// goroutine sends, one batch at a time, so a slow collector holds at
// most the queue and one batch.
type otlpExporter struct {
	cfg    OTLPConfig
	client *http.Client
	queue  chan otlpRecord
	flush  chan chan struct{}
	done   chan struct{}
	stop   context.CancelFunc
	ctx    context.Context
	warn   func(msg string, args ...any)
	closed sync.Once

	// exported, dropped and failed count records: sent and accepted,
	// refused at a full queue, lost with a failed export.
	exported, dropped, failed atomic.Uint64
}

func newOTLPExporter(cfg OTLPConfig, warn func(string, ...any)) *otlpExporter {
	tr := &http.Transport{
		Proxy:               nil, // as the proxy's own upstreams: never from the environment
		TLSClientConfig:     &tls.Config{RootCAs: cfg.Roots, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     90 * time.Second,
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &otlpExporter{
		cfg:    cfg,
		client: &http.Client{Transport: tr, Timeout: cfg.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		queue:  make(chan otlpRecord, cfg.QueueSize),
		flush:  make(chan chan struct{}),
		done:   make(chan struct{}),
		stop:   cancel,
		ctx:    ctx,
		warn:   warn,
	}
	go e.run()
	return e
}

// counts are the exporter's record counters.
func (e *otlpExporter) counts() (exported, dropped, failed uint64) {
	return e.exported.Load(), e.dropped.Load(), e.failed.Load()
}

// add queues a record, or drops it when the queue is full.
func (e *otlpExporter) add(t time.Time, f requestFields) {
	select {
	case e.queue <- otlpRecord{t: t, f: f}:
	default:
		e.dropped.Add(1)
	}
}

func (e *otlpExporter) run() {
	defer close(e.done)
	batch := make([]otlpRecord, 0, e.cfg.BatchSize)
	timer := time.NewTimer(e.cfg.Delay)
	defer timer.Stop()
	send := func() {
		if len(batch) > 0 {
			e.export(batch)
			clear(batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case r := <-e.queue:
			batch = append(batch, r)
			if len(batch) >= e.cfg.BatchSize {
				send()
			}
		case <-timer.C:
			send()
			timer.Reset(e.cfg.Delay)
		case <-e.ctx.Done():
			// close gave up waiting: what is left is lost.
			e.failed.Add(uint64(len(batch) + len(e.queue)))
			return
		case ack := <-e.flush:
			for drained := false; !drained; {
				select {
				case r := <-e.queue:
					batch = append(batch, r)
					if len(batch) >= e.cfg.BatchSize {
						send()
					}
				default:
					drained = true
				}
			}
			send()
			close(ack)
			return
		}
	}
}

// close sends what is queued, waiting at most until ctx is done, and
// stops the exporter.
func (e *otlpExporter) close(ctx context.Context) {
	e.closed.Do(func() {
		ack := make(chan struct{})
		select {
		case e.flush <- ack:
			select {
			case <-ack:
			case <-ctx.Done():
				e.stop()
			}
		case <-ctx.Done():
			e.stop()
		}
		e.stop()
		<-e.done
		e.client.CloseIdleConnections()
	})
}

// export POSTs one batch; a failure loses it, counted and logged
// without the headers or anything the collector answered but its status.
func (e *otlpExporter) export(batch []otlpRecord) {
	body := appendOTLPLogs(nil, e.cfg.Resource, batch)
	req, err := http.NewRequestWithContext(e.ctx, http.MethodPost, e.cfg.Endpoint, bytes.NewReader(body))
	if err != nil {
		e.failed.Add(uint64(len(batch)))
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "keyhole-proxy")
	for k, v := range e.cfg.Headers {
		req.Header.Set(k, v)
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.failed.Add(uint64(len(batch)))
		reason := "the collector cannot be reached"
		if isTimeout(err) || errors.Is(err, context.DeadlineExceeded) {
			reason = "the collector did not answer in time"
		}
		e.warn("OTLP log export failed; records dropped", "records", len(batch), "reason", reason)
		return
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		e.failed.Add(uint64(len(batch)))
		e.warn("OTLP log export failed; records dropped", "records", len(batch), "status", res.StatusCode)
		return
	}
	e.exported.Add(uint64(len(batch)))
}

// appendOTLPLogs appends an ExportLogsServiceRequest in the OTLP/HTTP
// JSON encoding: field names in lowerCamelCase, 64-bit integers as
// decimal strings, enums as numbers. Each record is one request line:
// body "request", severity INFO, and the line's fields as attributes
// under their OpenTelemetry semantic-convention names where one exists.
func appendOTLPLogs(b []byte, resource [][2]string, batch []otlpRecord) []byte {
	b = append(b, `{"resourceLogs":[{"resource":{"attributes":[`...)
	for i, kv := range resource {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendOTLPString(b, kv[0], kv[1])
	}
	b = append(b, `]},"scopeLogs":[{"scope":{"name":"keyhole.dev/keyhole/proxy"},"logRecords":[`...)
	for i, r := range batch {
		if i > 0 {
			b = append(b, ',')
		}
		ns := strconv.FormatInt(r.t.UnixNano(), 10)
		b = append(b, `{"timeUnixNano":"`...)
		b = append(b, ns...)
		b = append(b, `","observedTimeUnixNano":"`...)
		b = append(b, ns...)
		b = append(b, `","severityNumber":9,"severityText":"INFO","eventName":"keyhole.proxy.request","body":{"stringValue":"request"},"attributes":[`...)
		f := r.f
		for j, kv := range [...][2]string{
			{"keyhole.sandbox", f.sandbox},
			{"server.address", f.host},
			{"http.request.method", f.method},
			{"url.path", f.path},
			{"keyhole.decision", f.decision},
			{"keyhole.reason", f.reason},
			{"keyhole.connection", f.connection},
		} {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendOTLPString(b, kv[0], kv[1])
		}
		b = append(b, `,{"key":"http.response.status_code","value":{"intValue":"`...)
		b = strconv.AppendInt(b, int64(f.status), 10)
		b = append(b, `"}},{"key":"keyhole.duration_ms","value":{"doubleValue":`...)
		d := f.durationMS
		if math.IsNaN(d) || math.IsInf(d, 0) {
			d = 0
		}
		b = strconv.AppendFloat(b, d, 'g', -1, 64)
		b = append(b, `}}]}`...)
	}
	return append(b, `]}]}]}`...)
}

// appendOTLPString appends one KeyValue with a string value.
func appendOTLPString(b []byte, k, v string) []byte {
	b = append(b, `{"key":`...)
	b = appendJSONString(b, k)
	b = append(b, `,"value":{"stringValue":`...)
	b = appendJSONString(b, v)
	return append(b, `}}`...)
}
