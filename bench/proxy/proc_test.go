package main

import (
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		"keyhole-proxy": {
			in:   "4242 (keyhole-proxy) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 25 0 0 20 0 8 0 100 0 0\n",
			want: 1750 * time.Millisecond,
		},
		"command with spaces and parentheses": {
			in:   "7 (python3 (mitm) x) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 0 0\n",
			want: 70 * time.Millisecond,
		},
		"no command":       {in: "4242 S 1", wantErr: true},
		"truncated":        {in: "1 (a) S 1 2 3", wantErr: true},
		"negative utime":   {in: "1 (a) S 1 1 1 0 -1 0 0 0 0 0 -5 1 0\n", wantErr: true},
		"non-numeric time": {in: "1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 1 0\n", wantErr: true},
		"empty":            {in: "", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseStatus(t *testing.T) {
	tests := map[string]struct {
		in       string
		hwm, rss int64
		wantErr  bool
	}{
		"both":         {in: "Name:\tkeyhole-proxy\nVmPeak:\t 1300000 kB\nVmHWM:\t   51234 kB\nVmRSS:\t   50000 kB\n", hwm: 51234, rss: 50000},
		"no RSS line":  {in: "VmHWM: 10 kB\n", hwm: 10},
		"no HWM line":  {in: "VmRSS: 10 kB\n", wantErr: true},
		"garbage":      {in: "VmHWM: lots\n", wantErr: true},
		"negative RSS": {in: "VmHWM: 10 kB\nVmRSS: -1 kB\n", wantErr: true},
		"empty":        {in: "", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			hwm, rss, err := parseStatus([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if hwm != tc.hwm || rss != tc.rss {
				t.Errorf("got %d, %d, want %d, %d", hwm, rss, tc.hwm, tc.rss)
			}
		})
	}
}

// FuzzParseProc checks that neither /proc parser panics or returns a
// negative figure, whatever the kernel (or a test) hands it.
func FuzzParseProc(f *testing.F) {
	f.Add([]byte("4242 (keyhole-proxy) S 1 4242 4242 0 -1 4194560 1234 0 0 0 150 25 0 0 20 0 8 0 100 0 0\n"))
	f.Add([]byte("VmHWM:\t   51234 kB\nVmRSS:\t   50000 kB\n"))
	f.Add([]byte("1 ()) ) S"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if d, err := parseStat(data); err == nil && d < 0 {
			t.Errorf("parseStat gave a negative time %v", d)
		}
		if hwm, rss, err := parseStatus(data); err == nil && (hwm <= 0 || rss < 0) {
			t.Errorf("parseStatus gave hwm %d rss %d", hwm, rss)
		}
	})
}
