package proxy

import (
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
)

// otlpReceiver is an OTLP/HTTP logs endpoint on loopback that decodes
// what it gets with the collector's own JSON decoder.
type otlpReceiver struct {
	srv     *httptest.Server
	block   chan struct{} // when set, each export waits for it to close
	unblock func()

	mu      sync.Mutex
	raw     []string
	headers []http.Header
	records []plog.LogRecord
	res     []map[string]any
	errs    []error
}

func newOTLPReceiver(t testing.TB, block bool) *otlpReceiver {
	r := &otlpReceiver{}
	if block {
		r.block = make(chan struct{})
		r.unblock = sync.OnceFunc(func() { close(r.block) })
	}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if r.block != nil {
			<-r.block
		}
		logs, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.raw = append(r.raw, string(body))
		r.headers = append(r.headers, req.Header.Clone())
		if err != nil || req.URL.Path != "/v1/logs" || req.Header.Get("Content-Type") != "application/json" {
			r.errs = append(r.errs, errors.Join(err, errors.New(req.URL.Path+" "+req.Header.Get("Content-Type"))))
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		for i := 0; i < logs.ResourceLogs().Len(); i++ {
			rl := logs.ResourceLogs().At(i)
			for j := 0; j < rl.ScopeLogs().Len(); j++ {
				sl := rl.ScopeLogs().At(j)
				for k := 0; k < sl.LogRecords().Len(); k++ {
					r.records = append(r.records, sl.LogRecords().At(k))
					r.res = append(r.res, rl.Resource().Attributes().AsRaw())
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	}))
	t.Cleanup(func() {
		if r.block != nil {
			r.unblock()
		}
		r.srv.Close()
	})
	return r
}

func (r *otlpReceiver) got() ([]plog.LogRecord, []map[string]any, []error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]plog.LogRecord(nil), r.records...), append([]map[string]any(nil), r.res...), append([]error(nil), r.errs...)
}

// TestOTLPConfigFromEnv: the standard variables, each as the
// OpenTelemetry exporters read it, and a clear error for what
// keyhole-proxy cannot do, naming the variable and never a header's value.
func TestOTLPConfigFromEnv(t *testing.T) {
	tests := map[string]struct {
		env      map[string]string
		nilCfg   bool
		endpoint string
		headers  map[string]string
		timeout  time.Duration
		service  string
		wantErr  string
	}{
		"nothing set":         {env: map[string]string{}, nilCfg: true},
		"exporter none":       {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_LOGS_EXPORTER": "none"}, nilCfg: true},
		"base endpoint":       {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}, endpoint: "http://collector:4318/v1/logs", timeout: 10 * time.Second, service: "keyhole-proxy"},
		"logs endpoint as is": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://b/custom"}, endpoint: "https://b/custom", timeout: 10 * time.Second, service: "keyhole-proxy"},
		"headers, timeout, service": {
			env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b, x-tenant = t1", "OTEL_EXPORTER_OTLP_LOGS_TIMEOUT": "2500",
				"OTEL_RESOURCE_ATTRIBUTES": "service.name=ignored,k8s.pod.name=p", "OTEL_SERVICE_NAME": "egress"},
			endpoint: "http://c:4318/v1/logs", headers: map[string]string{"api-key": "a b", "x-tenant": "t1"}, timeout: 2500 * time.Millisecond, service: "egress",
		},
		"http/json":         {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, endpoint: "http://c:4318/v1/logs", timeout: 10 * time.Second, service: "keyhole-proxy"},
		"protobuf refused":  {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf"}, wantErr: "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL is \"http/protobuf\"; keyhole-proxy sends OTLP/HTTP JSON only"},
		"grpc refused":      {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, wantErr: "OTEL_EXPORTER_OTLP_PROTOCOL is \"grpc\""},
		"bad endpoint":      {env: map[string]string{"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "collector:4318"}, wantErr: "not an http:// or https:// URL"},
		"user in endpoint":  {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://u:CANARY-7f3e9b1c-do-not-leak@c:4318"}, wantErr: "without user information"},
		"bad header":        {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key"}, wantErr: "OTEL_EXPORTER_OTLP_HEADERS is not a list"},
		"header line break": {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=CANARY-7f3e9b1c-do-not-leak%0d%0aX: y"}, wantErr: `the entry for "api-key"`},
		"bad timeout":       {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, wantErr: "OTEL_EXPORTER_OTLP_TIMEOUT is \"10s\""},
		"bad queue":         {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_BLRP_MAX_QUEUE_SIZE": "0"}, wantErr: "OTEL_BLRP_MAX_QUEUE_SIZE"},
		"other exporter":    {env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_LOGS_EXPORTER": "console"}, wantErr: "OTEL_LOGS_EXPORTER"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := OTLPConfigFromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, ErrOTLPConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), canary) {
					t.Errorf("the error holds a secret value")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.nilCfg {
				if c != nil {
					t.Fatalf("got %+v, want no export", c)
				}
				return
			}
			if c.Endpoint != tc.endpoint || c.Timeout != tc.timeout || c.Resource[0] != [2]string{"service.name", tc.service} {
				t.Errorf("got endpoint %q timeout %v resource %v", c.Endpoint, c.Timeout, c.Resource)
			}
			for k, v := range tc.headers {
				if c.Headers[k] != v {
					t.Errorf("header %s = %q, want %q", k, c.Headers[k], v)
				}
			}
			if c.QueueSize != otlpDefaultQueue || c.BatchSize != otlpDefaultBatch || c.Delay != otlpDefaultDelay {
				t.Errorf("batching %d %d %v, want the batch processor's defaults", c.QueueSize, c.BatchSize, c.Delay)
			}
		})
	}
}

// TestOTLPDecodesAsTheCollector: what appendOTLPLogs writes is an
// ExportLogsServiceRequest the collector's JSON decoder reads back field
// for field, hostile strings included.
func TestOTLPDecodesAsTheCollector(t *testing.T) {
	at := time.Date(2026, 12, 6, 10, 0, 0, 123456789, time.UTC)
	hostile := "q\"uo\\te \x00\x1f\u2028 é ☃ 😀 \xff</script>"
	batch := []otlpRecord{
		{t: at, f: requestFields{sandbox: "agents/support", host: "api.github.com", method: "GET", path: "/repos/acme/widgets", decision: "inject", reason: "allowed", connection: "github-acme", status: 200, durationMS: 12.5}},
		{t: at.Add(time.Second), f: requestFields{sandbox: hostile, host: hostile, method: hostile, path: hostile, decision: "refuse", reason: "l7-not-allowed", status: 403, durationMS: math.NaN()}},
	}
	raw := appendOTLPLogs(nil, [][2]string{{"service.name", "keyhole-proxy"}, {"k8s.pod.name", hostile}}, batch)
	logs, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(raw)
	if err != nil {
		t.Fatalf("the collector cannot decode it: %v\n%s", err, raw)
	}
	rl := logs.ResourceLogs()
	if rl.Len() != 1 || rl.At(0).ScopeLogs().Len() != 1 || rl.At(0).ScopeLogs().At(0).LogRecords().Len() != 2 {
		t.Fatalf("decoded %d records, want 2 in one resource and scope", logs.LogRecordCount())
	}
	res := rl.At(0).Resource().Attributes().AsRaw()
	if res["service.name"] != "keyhole-proxy" || res["k8s.pod.name"] != strings.ToValidUTF8(hostile, "\ufffd") {
		t.Errorf("resource = %v", res)
	}
	if name := rl.At(0).ScopeLogs().At(0).Scope().Name(); name != "keyhole.dev/keyhole/proxy" {
		t.Errorf("scope %q", name)
	}
	r0 := rl.At(0).ScopeLogs().At(0).LogRecords().At(0)
	if r0.Timestamp().AsTime() != at || r0.SeverityNumber() != plog.SeverityNumberInfo || r0.Body().Str() != "request" || r0.EventName() != "keyhole.proxy.request" {
		t.Errorf("record 0: time %v severity %v body %q event %q", r0.Timestamp().AsTime(), r0.SeverityNumber(), r0.Body().Str(), r0.EventName())
	}
	want := map[string]any{
		"keyhole.sandbox": "agents/support", "server.address": "api.github.com", "http.request.method": "GET", "url.path": "/repos/acme/widgets",
		"keyhole.decision": "inject", "keyhole.reason": "allowed", "keyhole.connection": "github-acme",
		"http.response.status_code": int64(200), "keyhole.duration_ms": 12.5,
	}
	got := r0.Attributes().AsRaw()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %#v, want %#v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("attributes %v, want exactly %v", got, want)
	}
	r1 := rl.At(0).ScopeLogs().At(0).LogRecords().At(1).Attributes().AsRaw()
	if r1["url.path"] != strings.ToValidUTF8(hostile, "\ufffd") || r1["keyhole.duration_ms"] != 0.0 {
		t.Errorf("record 1: path %q duration %v", r1["url.path"], r1["keyhole.duration_ms"])
	}
}

// TestServerOTLPRequestLog: each request line also reaches a collector
// on loopback, decoded there as OTLP logs with the line's fields, with
// the configured headers; neither the Secret's value nor the collector's
// API key is in any record, and the API key is in no log line.
func TestServerOTLPRequestLog(t *testing.T) {
	const apiKey = "OTLP-KEY-CANARY-91ab-do-not-leak"
	rcv := newOTLPReceiver(t, false)
	h := newHarness(t, func(o *Options) {
		o.OTLPLogs = &OTLPConfig{Endpoint: rcv.srv.URL + "/v1/logs", Headers: map[string]string{"Api-Key": apiKey},
			Timeout: 5 * time.Second, QueueSize: 64, BatchSize: 8, Delay: 20 * time.Millisecond,
			Resource: [][2]string{{"service.name", "keyhole-proxy"}}}
	})
	c := h.client()
	t.Cleanup(c.CloseIdleConnections)
	for _, u := range []string{"https://api.github.com/repos/acme/widgets?token=" + canary, "https://api.github.com/orgs/acme"} {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
	}
	eventually(t, "the collector gets the request lines", func() bool {
		recs, _, _ := rcv.got()
		return len(recs) >= 3 // the CONNECT and the two requests
	})
	recs, res, errs := rcv.got()
	if len(errs) > 0 {
		t.Fatalf("the receiver refused exports: %v", errs)
	}
	var allowed, refused bool
	for i, r := range recs {
		a := r.Attributes().AsRaw()
		if res[i]["service.name"] != "keyhole-proxy" {
			t.Errorf("resource %v", res[i])
		}
		if a["keyhole.sandbox"] != "agents/support" || a["server.address"] != "api.github.com" {
			t.Errorf("record %d: %v", i, a)
		}
		switch a["url.path"] {
		case "/repos/acme/widgets":
			allowed = a["keyhole.decision"] == "inject" && a["keyhole.reason"] == "allowed" && a["http.response.status_code"] == int64(200) && a["keyhole.connection"] == "github-acme"
		case "/orgs/acme":
			refused = a["keyhole.decision"] == "refuse" && a["keyhole.reason"] == "l7-not-allowed" && a["http.response.status_code"] == int64(403)
		}
	}
	if !allowed || !refused {
		t.Errorf("the records lack the allowed and the refused request with their fields")
	}
	rcv.mu.Lock()
	for i, raw := range rcv.raw {
		if strings.Contains(raw, canary) || strings.Contains(raw, apiKey) {
			t.Errorf("export %d holds a secret value", i)
		}
		if rcv.headers[i].Get("Api-Key") != apiKey {
			t.Errorf("export %d lacks the configured header", i)
		}
	}
	rcv.mu.Unlock()
	if strings.Contains(h.logs.String(), apiKey) {
		t.Errorf("the proxy's log holds the collector's API key")
	}
	if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_otlp_log_records_total{result="exported"}`) {
		t.Errorf("metrics lack the exported records")
	}
}

// TestServerOTLPQueueFull: a collector that does not answer never slows
// a request: records past the bounded queue are dropped and counted, and
// shutdown gives up on the stuck export within its timeout.
func TestServerOTLPQueueFull(t *testing.T) {
	rcv := newOTLPReceiver(t, true)
	h := newHarness(t, func(o *Options) {
		o.OTLPLogs = &OTLPConfig{Endpoint: rcv.srv.URL + "/v1/logs", Timeout: time.Minute, QueueSize: 4, BatchSize: 1, Delay: time.Millisecond,
			Resource: [][2]string{{"service.name", "keyhole-proxy"}}}
		o.Timeouts.Shutdown = 2 * time.Second
	})
	c := h.client()
	t.Cleanup(c.CloseIdleConnections)
	start := time.Now()
	for range 40 {
		resp, err := c.Get("https://api.github.com/repos/acme/widgets")
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("40 requests took %v with the collector stuck", d)
	}
	m := h.get("/metrics")
	var dropped int
	for _, line := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(line, `keyhole_proxy_otlp_log_records_total{result="dropped"} `); ok {
			dropped, _ = strconv.Atoi(v)
		}
	}
	if dropped == 0 {
		t.Errorf("no record was counted dropped with the queue full:\n%s", m)
	}
	done := make(chan struct{})
	go func() { h.shutdown(); close(done) }()
	select {
	case <-done:
	case <-time.After(8 * time.Second):
		t.Fatal("shutdown waited on the stuck collector")
	}
}
