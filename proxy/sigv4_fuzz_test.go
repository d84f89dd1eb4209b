package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// FuzzParseAWSAuth: any Authorization header and query read as a SigV4
// signature without a panic, and the signed headers it keeps are lower
// case header names, each once, at most maxSignedHeaders.
func FuzzParseAWSAuth(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=omnia-injected-aws/20261206/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature="+strings.Repeat("0", 64), "")
	f.Add("", "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-SignedHeaders=host%3Bx-amz-date&X-Amz-Signature=00")
	f.Add("AWS4-HMAC-SHA256 SignedHeaders=", "x-amz-signedheaders=%zz")
	f.Fuzz(func(t *testing.T, authz, query string) {
		h := http.Header{}
		if authz != "" {
			h.Set("Authorization", authz)
		}
		a := ParseAWSAuth(h, query)
		if len(a.SignedHeaders) > maxSignedHeaders {
			t.Fatalf("%d signed headers", len(a.SignedHeaders))
		}
		seen := map[string]bool{}
		for _, n := range a.SignedHeaders {
			if n == "" || n != strings.ToLower(n) || !isHeaderName(n) || seen[n] {
				t.Fatalf("signed header %q", n)
			}
			seen[n] = true
		}
	})
}

// FuzzChunkSigner: any body read as aws-chunked either fails with a
// refusal or re-signs it: the output has the input's length and its
// chunks' data, only their signatures differ, and no chunk is held past
// maxAWSChunk.
func FuzzChunkSigner(f *testing.F) {
	f.Add(awsChunked([]byte("hello, bucket"), 5))
	f.Add(awsChunked(nil, 1))
	f.Add([]byte("5;chunk-signature=" + strings.Repeat("a", 64) + "\r\nhello\r\n"))
	f.Add([]byte("ffffffffffffffff;chunk-signature=" + strings.Repeat("a", 64) + "\r\n"))
	f.Add([]byte("0;chunk-signature=" + strings.Repeat("a", 64) + "\r\n\r\nextra"))
	creds := aws.Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, in []byte) {
		c := newChunkSigner(io.NopCloser(bytes.NewReader(in)), v4.NewStreamSigner(creds, "s3", "us-east-1", make([]byte, 32)), at)
		out, err := io.ReadAll(c)
		if err != nil {
			var r *sigV4Refusal
			if !asRefusal(err, &r) {
				t.Fatalf("error %v is not a refusal", err)
			}
			return
		}
		if len(out) != len(in) {
			t.Fatalf("re-signed body is %d bytes, the input %d", len(out), len(in))
		}
		sig := regexpChunkSig.ReplaceAll
		if !bytes.Equal(sig(out, []byte("X")), sig(in, []byte("X"))) {
			t.Fatalf("re-signed body differs from the input beyond its signatures")
		}
	})
}

// FuzzHashCheckBody: a body passes through whole exactly when its
// SHA-256 is the one declared; otherwise its last byte never does.
func FuzzHashCheckBody(f *testing.F) {
	f.Add([]byte("hello"), true, 3)
	f.Add([]byte(""), false, 1)
	f.Fuzz(func(t *testing.T, body []byte, match bool, chunk int) {
		want := strings.Repeat("0", 64)
		if match {
			want = sha256Hex(body)
		}
		b := &hashCheckBody{r: io.NopCloser(bytes.NewReader(body)), want: want, h: newSHA256()}
		var out []byte
		buf := make([]byte, max(1, chunk%4096+1))
		var err error
		for {
			var n int
			n, err = b.Read(buf)
			out = append(out, buf[:n]...)
			if err != nil {
				break
			}
		}
		if want == sha256Hex(body) {
			if err != io.EOF || !bytes.Equal(out, body) {
				t.Fatalf("a matching body came out as %q, %v", out, err)
			}
			return
		}
		if err == io.EOF || len(out) >= len(body) && len(body) > 0 {
			t.Fatalf("a body unlike its hash came out whole: %v", err)
		}
	})
}

var regexpChunkSig = regexp.MustCompile(`chunk-signature=[0-9a-fA-F]{64}`)

func asRefusal(err error, r **sigV4Refusal) bool { return errors.As(err, r) }

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func newSHA256() hash.Hash { return sha256.New() }
