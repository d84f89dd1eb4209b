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
// token, then the response head and its Content-Length body back. No
// policy, no header parsing beyond finding the end of the head and the
// length, no log line, no metrics, no secret file.
//
// It exists to bound the keep-alive ratio: what keyhole's HTTP handling
// costs is the gap between keyhole and the floor; what remains between
// the floor and direct is the price of terminating TLS in a third
// process on the same cores (two more TLS legs, two more syscalls each
// way, one more scheduler), which no HTTP implementation can remove.
// It handles exactly the driver's own requests (GET, no body) and fails
// the connection on anything else.

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
	for {
		req, err := readHead(cr)
		if err != nil {
			return err
		}
		if req, err = h.request(req); err != nil {
			return err
		}
		if _, err := uc.Write(req); err != nil {
			return err
		}
		res, err := readHead(ur)
		if err != nil {
			return err
		}
		n, err := contentLength(res)
		if err != nil {
			return err
		}
		if res, err = h.response(res); err != nil {
			return err
		}
		out = append(append(out[:0], res...), make([]byte, n)...)
		if _, err := io.ReadFull(ur, out[len(res):]); err != nil {
			return err
		}
		if _, err := sc.Write(out); err != nil {
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

// contentLength finds the Content-Length of a response head.
func contentLength(head []byte) (int, error) {
	for _, line := range bytes.Split(head, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && strings.EqualFold(string(k), "Content-Length") {
			n, err := strconv.Atoi(strings.TrimSpace(string(v)))
			if err != nil || n < 0 || n > 1<<20 {
				return 0, fmt.Errorf("bad Content-Length %q", v)
			}
			return n, nil
		}
	}
	return 0, errors.New("response without Content-Length")
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
