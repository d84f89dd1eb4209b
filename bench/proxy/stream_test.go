package main

import (
	"bufio"
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100, 99, ..., 1: unsorted
	}
	tests := map[string]struct {
		in   []time.Duration
		p    float64
		want time.Duration
		ok   bool
	}{
		"one sample":                {in: ms(7), p: 99, want: 7 * time.Millisecond, ok: true},
		"median of an odd count":    {in: ms(3, 1, 2), p: 50, want: 2 * time.Millisecond, ok: true},
		"median of an even count":   {in: ms(4, 1, 3, 2), p: 50, want: 2 * time.Millisecond, ok: true},
		"p99 of 100":                {in: ms(hundred...), p: 99, want: 99 * time.Millisecond, ok: true},
		"p100 is the largest":       {in: ms(hundred...), p: 100, want: 100 * time.Millisecond, ok: true},
		"a small p is the smallest": {in: ms(hundred...), p: 0.001, want: time.Millisecond, ok: true},
		"p99 of 10 is the largest":  {in: ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), p: 99, want: 10 * time.Millisecond, ok: true},
		"no samples":                {in: nil, p: 50},
		"p of 0":                    {in: ms(1), p: 0},
		"p over 100":                {in: ms(1), p: 101},
		"p NaN":                     {in: ms(1), p: math.NaN()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := percentile(tc.in, tc.p)
			if got != tc.want || ok != tc.ok {
				t.Errorf("percentile = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestEventSent(t *testing.T) {
	tests := map[string]struct {
		line    string
		want    int64
		wantErr error // errDone, or nil for any error when bad
		bad     bool
	}{
		"an event":             {line: `data: {"id":3,"sent":1765000000123456789,"pad":"x"}` + "\n", want: 1765000000123456789},
		"CRLF":                 {line: `data: {"sent":42}` + "\r\n", want: 42},
		"the end":              {line: "data: [DONE]\n", wantErr: errDone, bad: true},
		"no data field":        {line: `event: {"sent":42}` + "\n", bad: true},
		"no send time":         {line: `data: {"id":3}` + "\n", bad: true},
		"a zero send time":     {line: `data: {"sent":0}` + "\n", bad: true},
		"a negative send time": {line: `data: {"sent":-5}` + "\n", bad: true},
		"a send time as text":  {line: `data: {"sent":"42"}` + "\n", bad: true},
		"not JSON":             {line: "data: hello\n", bad: true},
		"empty":                {line: "", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := eventSent([]byte(tc.line))
			if tc.bad {
				if err == nil {
					t.Fatalf("eventSent = %d, want an error", got)
				}
				if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("eventSent = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestEvent: every event is eventSize bytes, one data line and a blank
// line, and gives back the time it was made with.
func TestEvent(t *testing.T) {
	for _, sent := range []int64{1, 1765000000123456789, math.MaxInt64} {
		for _, i := range []int{0, 7, 123456} {
			ev := event(i, sent)
			if len(ev) != eventSize {
				t.Errorf("event(%d, %d) is %d bytes, want %d: %q", i, sent, len(ev), eventSize, ev)
			}
			line, rest, ok := bytes.Cut(ev, []byte("\n"))
			if !ok || string(rest) != "\n" {
				t.Fatalf("event(%d, %d) = %q, want one line and a blank line", i, sent, ev)
			}
			if got, err := eventSent(line); err != nil || got != sent {
				t.Errorf("eventSent(event(%d, %d)) = %d, %v", i, sent, got, err)
			}
		}
	}
}

func TestFraming(t *testing.T) {
	tests := map[string]struct {
		head    string
		n       int64
		chunked bool
		bad     bool
	}{
		"a length":             {head: "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n", n: 1024},
		"a large length":       {head: "HTTP/1.1 200 OK\r\ncontent-length: 268435456\r\n\r\n", n: 268435456},
		"chunked":              {head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", n: -1, chunked: true},
		"neither":              {head: "GET / HTTP/1.1\r\nHost: a\r\n\r\n", n: -1},
		"both":                 {head: "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", bad: true},
		"a negative length":    {head: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", bad: true},
		"another coding":       {head: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", bad: true},
		"a length that is not": {head: "HTTP/1.1 200 OK\r\nContent-Length: 1e3\r\n\r\n", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			n, chunked, err := framing([]byte(tc.head))
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, bad %v", err, tc.bad)
			}
			if !tc.bad && (n != tc.n || chunked != tc.chunked) {
				t.Errorf("framing = %d, %v; want %d, %v", n, chunked, tc.n, tc.chunked)
			}
		})
	}
}

// TestRelayChunks: a chunked body is copied byte for byte up to its end,
// trailer included, one write per chunk, and nothing after it is read.
func TestRelayChunks(t *testing.T) {
	long := strings.Repeat("y", 70)
	tests := map[string]struct {
		in     string
		writes int
		bad    bool
	}{
		"events":          {in: "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", writes: 3},
		"an extension":    {in: "5;x=1\r\nhello\r\n0\r\n\r\n", writes: 2},
		"a trailer":       {in: "2\r\nhi\r\n0\r\nX-Sum: 1\r\n\r\n", writes: 2},
		"longer than buf": {in: "46\r\n" + long + "\r\n0\r\n\r\n", writes: 3},
		"a bad size":      {in: "zz\r\nhello\r\n", bad: true},
		"cut short":       {in: "5\r\nhel", bad: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := bufio.NewReader(strings.NewReader(tc.in + "NEXT"))
			var dst countingWriter
			err := relayChunks(&dst, src, make([]byte, 64))
			if (err != nil) != tc.bad {
				t.Fatalf("err = %v, bad %v", err, tc.bad)
			}
			if tc.bad {
				return
			}
			if dst.String() != tc.in || dst.writes != tc.writes {
				t.Errorf("copied %q in %d writes, want %q in %d", dst.String(), dst.writes, tc.in, tc.writes)
			}
			if rest, _ := src.ReadString(0); rest != "NEXT" {
				t.Errorf("left %q unread, want NEXT", rest)
			}
		})
	}
}

type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestSeries(t *testing.T) {
	nan := math.NaN()
	tests := map[string]struct {
		in   series
		want float64
	}{
		"odd":                  {in: series{3, 1, 2}, want: 2},
		"even":                 {in: series{4, 1, 3, 2}, want: 2.5},
		"a failed run skipped": {in: series{5, nan, 1, 3}, want: 3},
		"all failed":           {in: series{nan, nan}, want: nan},
		"none":                 {in: nil, want: nan},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := tc.in.median()
			if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
				t.Errorf("median = %v, want %v", got, tc.want)
			}
		})
	}
	r := ratio(series{10, 20, 30, 5}, series{5, 0, nan, 10}, 100)
	if len(r) != 4 || r[0] != 200 || !math.IsNaN(r[1]) || !math.IsNaN(r[2]) || r[3] != 50 {
		t.Errorf("ratio = %v, want 200 NaN NaN 50", r)
	}
	if d := diff(series{10, 20}, series{4}); len(d) != 1 || d[0] != 6 {
		t.Errorf("diff = %v, want 6", d)
	}
}
