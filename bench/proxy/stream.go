package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Streaming: the upstream answers streamPath with Server-Sent Events, one
// small token chunk (eventSize bytes, as a model API streams a completion)
// every interval for a duration the client asks for. Each event carries
// the upstream's wall-clock time just before its write, in Unix
// nanoseconds: both processes read the same clock on one machine, so the
// client's wall clock at the read, less that, is the event's delay
// through the route.

const (
	streamPath = benchPath + "/events"
	// streamInterval is how often the upstream writes an event.
	streamInterval = 20 * time.Millisecond
	// eventSize is the length of one event on the wire, blank line
	// included.
	eventSize = 100
	// doneEvent ends a stream, as model APIs end theirs.
	doneEvent = "data: [DONE]\n\n"
)

// errDone is what eventSent returns for the stream's last event.
var errDone = errors.New("end of stream")

// event formats event i, sent at sent (Unix nanoseconds), padded to
// eventSize bytes.
func event(i int, sent int64) []byte {
	b := make([]byte, 0, eventSize)
	b = append(b, `data: {"id":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	b = append(b, `,"sent":`...)
	b = strconv.AppendInt(b, sent, 10)
	b = append(b, `,"choices":[{"delta":{"content":" token"}}],"pad":"`...)
	for len(b) < eventSize-4 {
		b = append(b, 'x')
	}
	return append(b, "\"}\n\n"...)
}

// eventSent reads the upstream's send time from one "data: " line of an
// event; errDone for the stream's end.
func eventSent(line []byte) (int64, error) {
	data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data: "))
	if !ok {
		return 0, fmt.Errorf("not a data line: %q", clip(line))
	}
	if string(data) == "[DONE]" {
		return 0, errDone
	}
	var ev struct {
		Sent *int64 `json:"sent"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		return 0, fmt.Errorf("event %q: %w", clip(line), err)
	}
	if ev.Sent == nil || *ev.Sent <= 0 {
		return 0, fmt.Errorf("event %q: no send time", clip(line))
	}
	return *ev.Sent, nil
}

func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}

// serveEvents is the upstream's streaming route: events every
// streamInterval for the duration the query's d names (at most ten
// minutes), then doneEvent.
func serveEvents(w http.ResponseWriter, r *http.Request) {
	d, err := time.ParseDuration(r.URL.Query().Get("d"))
	if err != nil || d <= 0 || d > 10*time.Minute {
		http.Error(w, "bad duration", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return
	}
	t := time.NewTicker(streamInterval)
	defer t.Stop()
	stop := time.Now().Add(d)
	for i := 0; time.Now().Before(stop); i++ {
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
		if _, err := w.Write(event(i, time.Now().UnixNano())); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
	io.WriteString(w, doneEvent)
}

// stream reads one stream of duration d through rt and returns each
// event's delay from the upstream's write to the client's read.
func (e *env) stream(rt route, d time.Duration) ([]time.Duration, error) {
	c := e.client(rt, true)
	defer c.hc.CloseIdleConnections()
	c.hc.Timeout = d + 30*time.Second
	u := url.URL{Scheme: "https", Host: rt.host, Path: streamPath, RawQuery: "d=" + d.String()}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return nil, fmt.Errorf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReaderSize(resp.Body, 4<<10)
	delays := make([]time.Duration, 0, int(d/streamInterval)+1)
	for {
		line, err := br.ReadSlice('\n')
		now := time.Now().UnixNano()
		if err != nil {
			return nil, fmt.Errorf("after %d events: %w", len(delays), err)
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			continue // the blank line ending an event
		}
		sent, err := eventSent(line)
		if errors.Is(err, errDone) {
			break
		}
		if err != nil {
			return nil, err
		}
		delays = append(delays, time.Duration(now-sent))
	}
	if want := int(d / streamInterval); len(delays) < want*9/10 {
		return nil, fmt.Errorf("%d events, want about %d", len(delays), want)
	}
	return delays, nil
}

// percentile returns the p-th percentile (0 < p <= 100) of samples by
// the nearest-rank method: the smallest sample at or above p% of them.
// It sorts samples in place; with no samples, or p out of range, it
// returns 0 and false.
func percentile(samples []time.Duration, p float64) (time.Duration, bool) {
	if len(samples) == 0 || !(p > 0 && p <= 100) {
		return 0, false
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	k := int(math.Ceil(p / 100 * float64(len(samples))))
	return samples[max(k, 1)-1], true
}
