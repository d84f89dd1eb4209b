package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// An aws-chunked upload signed with STREAMING-AWS4-HMAC-SHA256-PAYLOAD
// carries a signature in each chunk's header, chained from the request's
// own: "<hex size>;chunk-signature=<64 hex>\r\n<data>\r\n", ending with a
// chunk of size 0. The proxy re-signs each chunk with the real key as it
// streams, chained from the signature it put on the request. A chunk's
// signature covers its data, which follows it, so the proxy holds one
// chunk at a time, at most maxAWSChunk bytes; the chunks' sizes, and so
// the body's length, are unchanged.

// maxAWSChunk bounds a chunk the proxy holds to re-sign it. The SDKs
// send 64 KiB chunks (botocore up to 1 MiB).
const maxAWSChunk = 8 << 20

// maxChunkHeader bounds a chunk's header line.
const maxChunkHeader = 4096

// chunkSignatureParam is the chunk extension that carries a signature.
const chunkSignatureParam = ";chunk-signature="

// AWSChunkHeader is one chunk header of an aws-chunked body, as
// ParseAWSChunkHeader reads it.
type AWSChunkHeader struct {
	// Size is the chunk's data length; SizeText is its hex spelling as
	// sent, which the re-signed header keeps.
	Size     int64
	SizeText string
}

// ParseAWSChunkHeader reads one chunk header line, without its CRLF:
// "<hex size>;chunk-signature=<64 hex>". The signature is not kept: the
// proxy replaces it.
func ParseAWSChunkHeader(line []byte) (AWSChunkHeader, error) {
	i := bytes.Index(line, []byte(chunkSignatureParam))
	if i <= 0 {
		return AWSChunkHeader{}, fmt.Errorf("a chunk header is not <size>%s<signature>", chunkSignatureParam)
	}
	size, sig := line[:i], line[i+len(chunkSignatureParam):]
	if len(size) > 16 {
		return AWSChunkHeader{}, fmt.Errorf("a chunk size has %d hex digits", len(size))
	}
	for _, c := range size {
		if !isHexByte(c) {
			return AWSChunkHeader{}, fmt.Errorf("a chunk size is not hex")
		}
	}
	n, err := strconv.ParseInt(string(size), 16, 64)
	if err != nil || n < 0 {
		return AWSChunkHeader{}, fmt.Errorf("a chunk size is not hex")
	}
	if n > maxAWSChunk {
		return AWSChunkHeader{}, fmt.Errorf("a chunk of %d bytes is longer than the %d the proxy holds to re-sign one", n, maxAWSChunk)
	}
	if len(sig) != 64 || !isHexHash(string(sig)) {
		return AWSChunkHeader{}, fmt.Errorf("a chunk signature is not 64 hex digits")
	}
	return AWSChunkHeader{Size: n, SizeText: string(size)}, nil
}

func isHexByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// chunkSigner re-signs an aws-chunked body as it is read.
type chunkSigner struct {
	src    io.ReadCloser
	in     *bufio.Reader
	signer *v4.StreamSigner
	at     time.Time
	out    []byte // re-signed bytes not yet read
	data   []byte
	done   bool
	err    error
}

func newChunkSigner(src io.ReadCloser, signer *v4.StreamSigner, at time.Time) *chunkSigner {
	return &chunkSigner{src: src, in: bufio.NewReaderSize(src, 64<<10), signer: signer, at: at}
}

// Read implements io.Reader.
func (c *chunkSigner) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if c.done {
			return 0, io.EOF
		}
		if err := c.next(); err != nil {
			c.err = err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// next reads one chunk and queues it re-signed. After the final chunk,
// nothing may follow.
func (c *chunkSigner) next() error {
	line, err := c.readLine()
	if err != nil {
		return err
	}
	h, err := ParseAWSChunkHeader(line)
	if err != nil {
		return &sigV4Refusal{"aws-chunked body: " + err.Error()}
	}
	if int64(cap(c.data)) < h.Size {
		c.data = make([]byte, h.Size)
	}
	data := c.data[:h.Size]
	if _, err := io.ReadFull(c.in, data); err != nil {
		return &sigV4Refusal{"aws-chunked body: a chunk ends before its size"}
	}
	var crlf [2]byte
	if _, err := io.ReadFull(c.in, crlf[:]); err != nil || crlf != [2]byte{'\r', '\n'} {
		return &sigV4Refusal{"aws-chunked body: a chunk's data is not followed by CRLF"}
	}
	sig, err := c.signer.GetSignature(context.Background(), nil, data, c.at)
	if err != nil {
		return fmt.Errorf("%w: %w", errSigV4, err)
	}
	c.out = fmt.Appendf(c.out[:0], "%s%s%s\r\n", h.SizeText, chunkSignatureParam, hex.EncodeToString(sig))
	c.out = append(c.out, data...)
	c.out = append(c.out, '\r', '\n')
	if h.Size == 0 {
		c.done = true
		if _, err := c.in.ReadByte(); err != io.EOF {
			return &sigV4Refusal{"aws-chunked body: bytes follow the final chunk"}
		}
	}
	return nil
}

// readLine reads a line ending in CRLF, at most maxChunkHeader long.
func (c *chunkSigner) readLine() ([]byte, error) {
	var line []byte
	for {
		b, err := c.in.ReadByte()
		if err != nil {
			return nil, &sigV4Refusal{"aws-chunked body: it ends before its final chunk"}
		}
		if b == '\n' {
			if len(line) == 0 || line[len(line)-1] != '\r' {
				return nil, &sigV4Refusal{"aws-chunked body: a chunk header does not end in CRLF"}
			}
			return line[:len(line)-1], nil
		}
		if len(line) >= maxChunkHeader {
			return nil, &sigV4Refusal{"aws-chunked body: a chunk header is too long"}
		}
		line = append(line, b)
	}
}

// Close closes the inbound body.
func (c *chunkSigner) Close() error { return c.src.Close() }
