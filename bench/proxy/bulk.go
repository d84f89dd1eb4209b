package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"keyhole.dev/keyhole/internal/bulk"
)

// Bulk transfers: the upstream answers bulkPath with as many bytes as the
// query's n asks, with a Content-Length, as a release asset or a tarball
// is served, and reads uploadPath's body whole and says how much it got.
// The bytes are pseudo-random, as compressed archives are, so a proxy
// scanning bodies for the credential sees realistic bytes.

const (
	bulkPath   = benchPath + "/tarball"
	uploadPath = benchPath + "/releases/assets"
	// maxBulk bounds what the upstream serves, so a typo in a flag does
	// not stream for hours.
	maxBulk = 16 << 30
)

// bulkBlock is the 64 KiB the upstream repeats, and the client too.
func bulkBlock() []byte { return bulk.Bytes(64 << 10) }

// serveBulk writes the n bytes the query asks for.
func serveBulk(w http.ResponseWriter, r *http.Request, block []byte) {
	n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
	if err != nil || n < 0 || n > maxBulk {
		http.Error(w, "bad size", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	io.Copy(w, io.LimitReader(bulk.Repeat(block), n))
}

// uploaded is the upstream's answer to an upload.
type uploaded struct {
	Received int64 `json:"received"`
}

// serveUpload reads the request's body and says how long it was.
func serveUpload(w http.ResponseWriter, r *http.Request) {
	n, err := io.Copy(io.Discard, r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	json.NewEncoder(w).Encode(uploaded{Received: n})
}

// download fetches n bytes through rt and returns MiB/s.
func (e *env) download(rt route, n int64) (float64, error) {
	c := e.client(rt, true)
	defer c.hc.CloseIdleConnections()
	c.hc.Timeout = 10 * time.Minute
	u := url.URL{Scheme: "https", Host: rt.host, Path: bulkPath, RawQuery: "n=" + strconv.FormatInt(n, 10)}
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", c.auth)
	t0 := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	buf := make([]byte, 64<<10)
	got, err := io.CopyBuffer(io.Discard, resp.Body, buf)
	el := time.Since(t0)
	if err != nil {
		return 0, fmt.Errorf("after %d bytes: %w", got, err)
	}
	if resp.StatusCode != 200 || got != n {
		return 0, fmt.Errorf("status %d, %d bytes of %d", resp.StatusCode, got, n)
	}
	return mibPerSec(n, el), nil
}

// upload sends n bytes through rt in one PUT and returns MiB/s.
func (e *env) upload(rt route, n int64, block []byte) (float64, error) {
	c := e.client(rt, true)
	defer c.hc.CloseIdleConnections()
	c.hc.Timeout = 10 * time.Minute
	u := url.URL{Scheme: "https", Host: rt.host, Path: uploadPath}
	req, err := http.NewRequest(http.MethodPut, u.String(), io.LimitReader(bulk.Repeat(block), n))
	if err != nil {
		return 0, err
	}
	req.ContentLength = n
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Content-Type", "application/octet-stream")
	t0 := time.Now()
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var got uploaded
	err = json.NewDecoder(resp.Body).Decode(&got)
	el := time.Since(t0)
	if resp.StatusCode != 200 || err != nil || got.Received != n {
		return 0, fmt.Errorf("status %d, upstream received %d bytes of %d (%v)", resp.StatusCode, got.Received, n, err)
	}
	return mibPerSec(n, el), nil
}

func mibPerSec(n int64, d time.Duration) float64 {
	return float64(n) / (1 << 20) / d.Seconds()
}

// rssSampler reads a process's VmRSS every few milliseconds until stopped
// and keeps the largest.
type rssSampler struct {
	stopc chan struct{}
	wg    sync.WaitGroup
	peak  int64 // KiB
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stopc: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if _, rss, err := procStatus(pid); err == nil {
				s.peak = max(s.peak, rss)
			}
			select {
			case <-s.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peak VmRSS seen, in KiB.
func (s *rssSampler) stop() int64 {
	close(s.stopc)
	s.wg.Wait()
	return s.peak
}
