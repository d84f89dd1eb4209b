package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The terminating floor is a contender that is not a product: the least
// work any TLS-terminating proxy written in Go can do on this workload.
// It answers CONNECT, terminates TLS with a leaf from the sandbox CA,
// keeps one verified TLS connection to the upstream per tunnel, and per
// request copies the request head with the placeholder replaced by the
// token and its Content-Length body, then the response head and its body
// back, a Content-Length one in one write when it is small, a chunked
// one chunk by chunk as it arrives. No
// policy, no header parsing beyond finding the end of the head and the
// length, no log line, no metrics, no secret file.
//
// It exists to bound the keep-alive ratio: what keyhole's HTTP handling
// costs is the gap between keyhole and the floor; what remains between
// the floor and direct is the price of terminating TLS in a third
// process on the same cores (two more TLS legs, two more syscalls each
// way, one more scheduler), which no HTTP implementation can remove.
// It handles exactly the driver's own requests (GET, or PUT with a
// Content-Length) and fails the connection on anything else.

// placeholder is what the injected routes send in Authorization.
const placeholder = "omnia-injected-bench"

// serveFloor runs the floor process (or, with sketch, the fast-path
// sketch): listens on 127.0.0.1, prints its address, serves until stdin
// closes.
func serveFloor(dir, upstream string, sketch bool, stdout io.Writer) int {
	h := floorHeads()
	if sketch {
		var err error
		if h, err = sketchHeads(dir); err != nil {
			fmt.Fprintln(os.Stderr, "sketch:", err)
			return 1
		}
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "floor.crt"), filepath.Join(dir, "floor.key"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "upstream-ca.crt"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		fmt.Fprintln(os.Stderr, "floor: no upstream CA")
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		return 1
	}
	fmt.Fprintln(stdout, ln.Addr().String())
	go func() {
		io.Copy(io.Discard, os.Stdin)
		ln.Close()
	}()
	srvCfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"http/1.1"}}
	upCfg := &tls.Config{RootCAs: roots, ServerName: benchHost, NextProtos: []string{"http/1.1"}}
	for {
		c, err := ln.Accept()
		if err != nil {
			return 0
		}
		go func() {
			defer c.Close()
			if err := floorTunnel(c, upstream, srvCfg, upCfg, h); err != nil && !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "floor:", err)
			}
		}()
	}
}

// heads transforms a request head before it goes upstream and a response
// head before it goes back; the floor's swaps the placeholder only.
type heads struct {
	request  func(head []byte) ([]byte, error)
	response func(head []byte) ([]byte, error)
}

func floorHeads() heads {
	return heads{
		request: func(head []byte) ([]byte, error) {
			return bytes.Replace(head, []byte(placeholder), []byte(token), 1), nil
		},
		response: func(head []byte) ([]byte, error) { return head, nil },
	}
}

func floorTunnel(c net.Conn, upstream string, srvCfg, upCfg *tls.Config, h heads) error {
	br := bufio.NewReader(c)
	head, err := readHead(br)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(head, []byte("CONNECT "+benchHost+":443 ")) {
		return fmt.Errorf("unexpected CONNECT %q", head)
	}
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return err
	}
	sc := tls.Server(c, srvCfg)
	defer sc.Close()
	raw, err := net.DialTimeout("tcp", upstream, 5*time.Second)
	if err != nil {
		return err
	}
	uc := tls.Client(raw, upCfg)
	defer uc.Close()
	cr, ur := bufio.NewReaderSize(sc, 4<<10), bufio.NewReaderSize(uc, 4<<10)
	out := make([]byte, 0, 4<<10)
	buf := make([]byte, 32<<10)
	for {
		req, err := readHead(cr)
		if err != nil {
			return err
		}
		reqLen, chunked, err := framing(req)
		if err != nil {
			return err
		}
		if chunked {
			return errors.New("a chunked request body")
		}
		if req, err = h.request(req); err != nil {
			return err
		}
		if _, err := uc.Write(req); err != nil {
			return err
		}
		if reqLen > 0 {
			if _, err := io.CopyBuffer(uc, io.LimitReader(cr, reqLen), buf); err != nil {
				return err
			}
		}
		res, err := readHead(ur)
		if err != nil {
			return err
		}
		n, chunked, err := framing(res)
		if err != nil {
			return err
		}
		if n < 0 && !chunked {
			return errors.New("response without Content-Length or chunked coding")
		}
		if res, err = h.response(res); err != nil {
			return err
		}
		switch {
		case chunked:
			// A stream: each chunk is sent on as it arrives.
			if _, err := sc.Write(res); err != nil {
				return err
			}
			if err := relayChunks(sc, ur, buf); err != nil {
				return err
			}
		case n <= 64<<10:
			// A small body: head and body in one write.
			out = append(append(out[:0], res...), make([]byte, n)...)
			if _, err := io.ReadFull(ur, out[len(res):]); err != nil {
				return err
			}
			if _, err := sc.Write(out); err != nil {
				return err
			}
		default:
			if _, err := sc.Write(res); err != nil {
				return err
			}
			if got, err := io.CopyBuffer(sc, io.LimitReader(ur, n), buf); err != nil || got != n {
				return fmt.Errorf("body cut at %d of %d bytes: %v", got, n, err)
			}
		}
	}
}

// relayChunks copies one chunked body, trailer included, from src to dst
// as it arrives: one write per chunk (per len(buf) bytes of a longer one).
func relayChunks(dst io.Writer, src *bufio.Reader, buf []byte) error {
	for {
		line, err := src.ReadSlice('\n')
		if err != nil {
			return err
		}
		sizeText, _, _ := strings.Cut(strings.TrimSpace(string(line)), ";")
		size, err := strconv.ParseInt(sizeText, 16, 64)
		if err != nil || size < 0 {
			return fmt.Errorf("bad chunk size %q", line)
		}
		out := append(buf[:0], line...)
		if size == 0 {
			// The last chunk: the trailer's lines, then the blank line.
			for {
				l, err := src.ReadSlice('\n')
				if err != nil {
					return err
				}
				if len(out)+len(l) > len(buf) {
					return errors.New("trailer too large")
				}
				out = append(out, l...)
				if strings.TrimRight(string(l), "\r\n") == "" {
					_, err := dst.Write(out)
					return err
				}
			}
		}
		for need := size + 2; need > 0; { // the data and its CRLF
			if len(out) == len(buf) {
				if _, err := dst.Write(out); err != nil {
					return err
				}
				out = buf[:0]
			}
			k := int(min(need, int64(len(buf)-len(out))))
			m, err := io.ReadFull(src, buf[len(out):len(out)+k])
			out = buf[:len(out)+m]
			need -= int64(m)
			if err != nil {
				return err
			}
		}
		if _, err := dst.Write(out); err != nil {
			return err
		}
	}
}

// readHead reads up to and including the blank line ending a head.
func readHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return nil, err
		}
		head = append(head, line...)
		if len(line) <= 2 && strings.TrimRight(string(line), "\r\n") == "" {
			return head, nil
		}
		if len(head) > 16<<10 {
			return nil, errors.New("head too large")
		}
	}
}

// framing reads how a head's body is framed: its Content-Length (-1
// when it has none) and whether it is chunked.
func framing(head []byte) (n int64, chunked bool, err error) {
	n = -1
	for _, line := range bytes.Split(head, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch {
		case strings.EqualFold(string(k), "Content-Length"):
			if n, err = strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err != nil || n < 0 {
				return 0, false, fmt.Errorf("bad Content-Length %q", v)
			}
		case strings.EqualFold(string(k), "Transfer-Encoding"):
			if !strings.EqualFold(strings.TrimSpace(string(v)), "chunked") {
				return 0, false, fmt.Errorf("Transfer-Encoding %q", v)
			}
			chunked = true
		}
	}
	if chunked && n >= 0 {
		return 0, false, errors.New("both Content-Length and chunked")
	}
	return n, chunked, nil
}

// startFloor runs this binary again as the floor process, or as the
// fast-path sketch; both serve with the leaf newEnv wrote (floor.crt) and
// verify the upstream with its CA (upstream-ca.crt).
func (e *env) startFloor(sketch bool) (*process, error) {
	name := nameFloor
	if sketch {
		name = nameSketch
	}
	return e.startSelf(name, "-serve-floor", e.dir, "-floor-upstream", e.upstream, "-floor-sketch="+strconv.FormatBool(sketch))
}
