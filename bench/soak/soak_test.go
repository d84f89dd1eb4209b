package main

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	tests := map[string]struct {
		in   []time.Duration
		q    float64
		want time.Duration
	}{
		"empty":      {in: nil, q: 0.5, want: 0},
		"one":        {in: ms(7), q: 0.99, want: 7 * time.Millisecond},
		"median odd": {in: ms(3, 1, 2), q: 0.5, want: 2 * time.Millisecond},
		"p99 of 100": {in: ms(func() []int {
			var s []int
			for i := 100; i >= 1; i-- {
				s = append(s, i)
			}
			return s
		}()...), q: 0.99, want: 99 * time.Millisecond},
		"max": {in: ms(5, 9, 1), q: 1, want: 9 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := quantile(tc.in, tc.q); got != tc.want {
				t.Fatalf("quantile = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMetricValue(t *testing.T) {
	text := "# HELP keyhole_proxy_goroutines x\n# TYPE keyhole_proxy_goroutines gauge\nkeyhole_proxy_goroutines 12\n" +
		"keyhole_proxy_goroutines_other 5\n" +
		`keyhole_proxy_reloads_total{what="config",result="ok"} 3` + "\n" +
		`keyhole_proxy_reloads_total{what="ca",result="ok"} 1` + "\n" +
		`keyhole_proxy_reloads_total{what="config",result="error"} 2` + "\n"
	tests := map[string]struct {
		got, want float64
	}{
		"gauge, not a longer name": {got: metricValue(text, "keyhole_proxy_goroutines"), want: 12},
		"summed over labels":       {got: metricValue(text, "keyhole_proxy_reloads_total"), want: 6},
		"by label":                 {got: metricLabelled(text, "keyhole_proxy_reloads_total", `result="ok"`), want: 4},
		"missing":                  {got: metricValue(text, "nope"), want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %v, want %v", tc.got, tc.want)
			}
		})
	}
}

func TestScanLog(t *testing.T) {
	const secret = "soak-token-1-abcdef"
	log := `{"msg":"request","path":"/x"}` + "\n" +
		`{"msg":"upstream request failed","error":"Bearer ` + secret + `"}` + "\n" +
		`{"msg":"request","h":"Basic ` + base64.StdEncoding.EncodeToString([]byte(secret)) + `"}` + "\n" +
		"not json\n"
	path := filepath.Join(t.TempDir(), "proxy.log")
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := scanLog(path, []string{secret, "other-secret"})
	if err != nil {
		t.Fatal(err)
	}
	want := logScan{lines: 4, requestLines: 2, notJSON: 1, withSecret: 2, secretsSearched: 2}
	if got != want {
		t.Fatalf("scanLog = %+v, want %+v", got, want)
	}
}

func TestStatusField(t *testing.T) {
	status := "Name:\tkeyhole-proxy\nVmHWM:\t   51234 kB\nVmRSS:\t   50000 kB\n"
	if v, err := statusField(status, "VmRSS:"); err != nil || v != 50000 {
		t.Fatalf("VmRSS = %d, %v", v, err)
	}
	if _, err := statusField(status, "VmSwap:"); err == nil {
		t.Fatal("a missing field read as present")
	}
}

// TestKubeletWrite checks the soak rotates as the kubelet does: each key a
// link through ..data, ..data one link swapped by rename, the old
// timestamped directory gone.
func TestKubeletWrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s")
	for gen, v := range []string{"one", "two"} {
		if err := kubeletWrite(dir, gen+1, map[string]string{"tls.key": v}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "tls.key"))
		if err != nil || string(got) != v {
			t.Fatalf("after write %d: %q, %v", gen+1, got, err)
		}
		if l, err := os.Readlink(filepath.Join(dir, "tls.key")); err != nil || l != filepath.Join("..data", "tls.key") {
			t.Fatalf("key link = %q, %v", l, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 { // ..data, one timestamped directory, the key
		t.Fatalf("%d entries after two writes, want 3", len(entries))
	}
}
