package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/textproto"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"keyhole.dev/keyhole/proxy"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// The fast-path sketch is the floor plus keyhole's own per-request work,
// done by keyhole's own functions: the request head parsed into a header
// map, the policy decision (policy.Policy.Decide on the same config),
// hop-by-hop headers stripped, the credential injected from the mounted
// Secret (proxy.Inject through proxy.SecretDir, the inotify cache), the
// head written back out, the upstream's response head parsed, stripped
// of hop-by-hop and refusal headers and scrubbed of the credential, and a
// JSON log line formatted. What it
// leaves out is net/http on both legs. It is not a product and not safe:
// it trusts the driver's requests (no framing checks, no limits), and it
// exists only to measure what a hand-written HTTP/1.1 fast path with
// keyhole's policy could reach on this workload — the number the keep-alive
// target turns on.

// sketchHeads builds the sketch's transforms from the bench's config and
// Secret directory.
func sketchHeads(dir string) (heads, error) {
	cfg, err := config.Load(filepath.Join(dir, "proxy.json"))
	if err != nil {
		return heads{}, err
	}
	pol, err := policy.NewPolicy(cfg)
	if err != nil {
		return heads{}, err
	}
	hp := pol.Host(benchHost)
	if hp == nil {
		return heads{}, errors.New("the bench config has no injected host")
	}
	secrets := proxy.NewSecretDir(filepath.Join(dir, "secrets"))
	logLine := make([]byte, 0, 512)
	var inj proxy.Injected // what the request carried, scrubbed from its response
	request := func(head []byte) ([]byte, error) {
		start := time.Now()
		method, target, header, err := parseHead(head)
		if err != nil {
			return nil, err
		}
		d := pol.Decide(policy.RequestInfo{Kind: policy.KindTunnel, Method: method, Target: target,
			ConnectHost: benchHost, SNI: benchHost, Host: header.Get("Host"), Header: header, BodyComplete: true})
		if !d.Allowed() {
			return nil, fmt.Errorf("refused: %s", d.Reason)
		}
		stripHop(header)
		if inj, err = proxy.Inject(hp, header, secrets.Lookup); err != nil {
			return nil, err
		}
		out := writeHead(method+" "+target+" HTTP/1.1", header)
		// The log line keyhole writes, formatted and dropped: the batched
		// write it would cost is amortized over many lines.
		logLine = logLine[:0]
		logLine = append(logLine, `{"time":"`...)
		logLine = time.Now().AppendFormat(logLine, time.RFC3339Nano)
		logLine = append(logLine, `","level":"INFO","msg":"request","sandbox":"bench","host":`...)
		logLine = strconv.AppendQuote(logLine, d.Host)
		logLine = append(logLine, `,"method":`...)
		logLine = strconv.AppendQuote(logLine, method)
		logLine = append(logLine, `,"path":`...)
		logLine = strconv.AppendQuote(logLine, target)
		logLine = append(logLine, `,"decision":"inject","reason":"allowed","connection":"bench","status":200,"duration_ms":`...)
		logLine = strconv.AppendFloat(logLine, float64(time.Since(start).Microseconds())/1000, 'f', -1, 64)
		logLine = append(logLine, "}\n"...)
		io.Discard.Write(logLine)
		return out, nil
	}
	response := func(head []byte) ([]byte, error) {
		proto, status, header, err := parseHead(head)
		if err != nil {
			return nil, err
		}
		stripHop(header)
		header.Del(policy.RefusedHeader)
		inj.ScrubHeader(header)
		return writeHead(proto+" "+status+" OK", header), nil
	}
	return heads{request: request, response: response}, nil
}

// parseHead splits a head into its first line's first two fields and its
// header, canonicalizing names as net/http does.
func parseHead(head []byte) (first, second string, h http.Header, err error) {
	lines := strings.Split(strings.TrimSuffix(string(head), "\r\n\r\n"), "\r\n")
	parts := strings.SplitN(lines[0], " ", 3)
	if len(parts) < 2 {
		return "", "", nil, fmt.Errorf("bad first line %q", lines[0])
	}
	h = make(http.Header, len(lines))
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			return "", "", nil, fmt.Errorf("bad header line %q", l)
		}
		k = textproto.CanonicalMIMEHeaderKey(k)
		h[k] = append(h[k], strings.TrimSpace(v))
	}
	return parts[0], parts[1], h, nil
}

// stripHop removes the hop-by-hop headers, as keyhole does.
func stripHop(h http.Header) {
	for _, k := range [...]string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		delete(h, k)
	}
}

// writeHead writes a first line and a header, keys sorted as net/http
// writes them.
func writeHead(first string, h http.Header) []byte {
	var b bytes.Buffer
	b.WriteString(first)
	b.WriteString("\r\n")
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			b.WriteString(k)
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteString("\r\n")
		}
	}
	b.WriteString("\r\n")
	return b.Bytes()
}
