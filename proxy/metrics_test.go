package proxy

import (
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/policy"
)

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("boom")

func TestMetricsWrite(t *testing.T) {
	m := newMetrics()
	m.request("api.github.com", policy.Decision{Action: policy.ActionInject, Reason: policy.ReasonAllowed})
	m.request("api.github.com", policy.Decision{Action: policy.ActionInject, Reason: policy.ReasonAllowed})
	m.request(`we"ird\host`+"\n", policy.Refusal(policy.ReasonHostNotAllowed, "", "x"))
	m.injectFailure("api.github.com")
	m.scrubbed("api.github.com", "trailer")
	m.reload("config", nil)
	m.reload("ca", errTest)
	m.observeUpstream(time.Millisecond)     // exactly a bound: counted in it
	m.observeUpstream(3 * time.Millisecond) // in le=0.005
	m.observeUpstream(time.Minute)          // only in +Inf
	m.mints.Add(2)
	m.goroutines = func() int { return 7 }
	var a, b strings.Builder
	m.write(&a)
	m.write(&b)
	if a.String() != b.String() {
		t.Fatal("two scrapes of one state differ")
	}
	out := a.String()
	tests := map[string]string{
		"requests":      `keyhole_proxy_requests_total{host="api.github.com",decision="inject",reason="allowed"} 2`,
		"escaped label": `keyhole_proxy_requests_total{host="we\"ird\\host\n",decision="refuse",reason="host-not-allowed"} 1`,
		"failures":      `keyhole_proxy_injection_failures_total{host="api.github.com"} 1`,
		"mints":         "keyhole_proxy_cert_mints_total 2\n",
		"goroutines":    "keyhole_proxy_goroutines 7\n",
		"scrubs":        `keyhole_proxy_response_scrubs_total{host="api.github.com",where="trailer"} 1`,
		"reload ok":     `keyhole_proxy_reloads_total{what="config",result="ok"} 1`,
		"reload error":  `keyhole_proxy_reloads_total{what="ca",result="error"} 1`,
		"bucket below":  `keyhole_proxy_upstream_latency_seconds_bucket{le="0.0005"} 0`,
		"bucket bound":  `keyhole_proxy_upstream_latency_seconds_bucket{le="0.001"} 1`,
		"bucket cumul":  `keyhole_proxy_upstream_latency_seconds_bucket{le="0.005"} 2`,
		"bucket top":    `keyhole_proxy_upstream_latency_seconds_bucket{le="30"} 2`,
		"bucket inf":    `keyhole_proxy_upstream_latency_seconds_bucket{le="+Inf"} 3`,
		"count":         "keyhole_proxy_upstream_latency_seconds_count 3\n",
	}
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(out, want) {
				t.Fatalf("missing %s in:\n%s", want, out)
			}
		})
	}
}
