package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"keyhole.dev/keyhole/proxy/policy"
)

// The keys the sandbox signs with (docs/spec.md §2's placeholder) and
// the real ones, which only the proxy holds. The secret access key is
// the canary: it must never appear in any output.
const (
	sigv4Placeholder = "omnia-injected-aws-s3"
	sigv4KeyID       = "AKIAKEYHOLETEST00001"
	sigv4Secret      = canary
)

// sigv4Config injects AWS SigV4 on an S3 host (PUT and GET under
// /bucket, never DELETE) and on Bedrock's runtime host.
const sigv4Config = configHead + `
  "scrubResponseBodies": true,
  "hosts": [
    {"name": "bedrock-runtime.us-west-2.amazonaws.com", "connection": "aws-s3",
     "inject": {"secret": "acme-github-token", "awsSigV4": {"accessKeyIdKey": "AWS_ACCESS_KEY_ID", "secretAccessKeyKey": "AWS_SECRET_ACCESS_KEY",
       "sessionTokenKey": "AWS_SESSION_TOKEN", "region": "us-west-2", "service": "bedrock"}},
     "rules": [{"methods": ["POST"], "pathPatterns": ["/model/*/invoke"]}]},
    {"name": "s3.us-east-1.amazonaws.com", "connection": "aws-s3",
     "inject": {"secret": "acme-github-token", "awsSigV4": {"accessKeyIdKey": "AWS_ACCESS_KEY_ID", "secretAccessKeyKey": "AWS_SECRET_ACCESS_KEY",
       "sessionTokenKey": "AWS_SESSION_TOKEN", "region": "us-east-1", "service": "s3"}},
     "rules": [{"methods": ["GET", "HEAD", "PUT"], "pathPrefixes": ["/bucket"]}]}
  ]
}`

// sigv4StandIn is an AWS endpoint that verifies SigV4 as AWS does, with
// the real key: the header form's signature, a signed body's hash, and
// each chunk of an aws-chunked upload. It answers 403 to a request whose
// signature it cannot verify and echoes the request's Authorization and
// session token in its body otherwise, as an error page might.
type sigv4StandIn struct {
	srv *httptest.Server
	mu  sync.Mutex
	key string // the secret access key it accepts
	got []seen
	// verified says, for each of got, whether its signature verified.
	verified []bool
	// failures says why requests were refused.
	failures []string
}

func newSigV4StandIn(t testing.TB, ca *testCA, names ...string) *sigv4StandIn {
	s := &sigv4StandIn{key: sigv4Secret}
	s.srv = ca.serve(t, http.HandlerFunc(s.serve), names...)
	return s
}

func (s *sigv4StandIn) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	key := s.key
	s.mu.Unlock()
	data, err := verifySigV4(r, body, key)
	s.mu.Lock()
	s.got = append(s.got, seen{Host: r.Host, Method: r.Method, URI: r.RequestURI, Header: r.Header.Clone(), Body: string(body)})
	s.verified = append(s.verified, err == nil)
	if err != nil {
		s.failures = append(s.failures, err.Error())
	}
	s.mu.Unlock()
	if err != nil {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "<Error><Code>SignatureDoesNotMatch</Code><Message>%s</Message><Authorization>%s</Authorization></Error>", err, r.Header.Get("Authorization"))
		return
	}
	w.Header().Set("X-Echo", r.Header.Get("Authorization"))
	fmt.Fprintf(w, "ok %s %d bytes\nauth: %s\ntoken: %s\n", r.URL.Path, len(data), r.Header.Get("Authorization"), r.Header.Get("X-Amz-Security-Token"))
}

// verifiedSince reports whether a request after the first n verified.
func (s *sigv4StandIn) verifiedSince(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.verified[n:], true)
}

func (s *sigv4StandIn) seen() ([]seen, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seen(nil), s.got...), append([]string(nil), s.failures...)
}

// verifySigV4 checks r's SigV4 signature with the secret access key key
// and returns the payload: the body, or the data of its chunks.
func verifySigV4(r *http.Request, body []byte, key string) ([]byte, error) {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return nil, fmt.Errorf("no SigV4 Authorization")
	}
	f := map[string]string{}
	for part := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		f[k] = v
	}
	scope := strings.Split(f["Credential"], "/")
	if len(scope) != 5 {
		return nil, fmt.Errorf("credential %q", f["Credential"])
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return nil, fmt.Errorf("X-Amz-Date: %v", err)
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	} else if len(payload) == 64 {
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != payload {
			return nil, fmt.Errorf("XAmzContentSHA256Mismatch (%d bytes)", len(body))
		}
	}
	check := httptest.NewRequest(r.Method, r.RequestURI, nil)
	check.Host = r.Host
	check.Header = http.Header{}
	for _, h := range strings.Split(f["SignedHeaders"], ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		check.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	check.ContentLength = r.ContentLength
	creds := aws.Credentials{AccessKeyID: scope[0], SecretAccessKey: key, SessionToken: r.Header.Get("X-Amz-Security-Token")}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, check, payload, scope[3], scope[2], at, func(o *v4.SignerOptions) {
		o.DisableURIPathEscaping = scope[3] == "s3"
		o.DisableSessionToken = true
	}); err != nil {
		return nil, err
	}
	_, want, _ := strings.Cut(check.Header.Get("Authorization"), "Signature=")
	if want != f["Signature"] {
		return nil, fmt.Errorf("SignatureDoesNotMatch")
	}
	if payload != streamingSigned {
		return body, nil
	}
	seed, _ := hex.DecodeString(want)
	ss := v4.NewStreamSigner(creds, scope[3], scope[2], seed)
	var data []byte
	for {
		line, after, ok := bytes.Cut(body, []byte("\r\n"))
		if !ok {
			return nil, fmt.Errorf("chunk header")
		}
		size, sig, _ := strings.Cut(string(line), ";chunk-signature=")
		n, err := strconv.ParseInt(size, 16, 64)
		if err != nil || int64(len(after)) < n+2 {
			return nil, fmt.Errorf("chunk size")
		}
		chunk := after[:n]
		got, _ := ss.GetSignature(context.Background(), nil, chunk, at)
		if hex.EncodeToString(got) != sig {
			return nil, fmt.Errorf("chunk SignatureDoesNotMatch")
		}
		data, body = append(data, chunk...), after[n+2:]
		if n == 0 {
			if len(body) != 0 {
				return nil, fmt.Errorf("bytes after the final chunk")
			}
			return data, nil
		}
	}
}

// newSigV4Harness runs the proxy with sigv4Config, the real key mounted,
// both AWS hosts resolved to the stand-in.
func newSigV4Harness(t testing.TB) (*harness, *sigv4StandIn) {
	t.Helper()
	awsCA := newTestCA(t, "aws stand-in CA")
	s := newSigV4StandIn(t, awsCA, "s3.us-east-1.amazonaws.com", "bedrock-runtime.us-west-2.amazonaws.com")
	h := newHarnessConfig(t, sigv4Config, resolveTo(awsCA, s.srv.Listener.Addr().String(), "s3.us-east-1.amazonaws.com", "bedrock-runtime.us-west-2.amazonaws.com"))
	h.secrets.write(map[string]string{"AWS_ACCESS_KEY_ID": sigv4KeyID, "AWS_SECRET_ACCESS_KEY": sigv4Secret + "\n", "AWS_SESSION_TOKEN": "SESSION-" + canary})
	return h, s
}

// sandboxSigned builds a request signed as the sandbox's SDK signs it:
// with the placeholder keys, header form, or presigned in the query.
func sandboxSigned(t testing.TB, method, u, payload string, body []byte, service, region string, presign bool, header map[string]string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	if payload != "" {
		req.Header.Set("X-Amz-Content-Sha256", payload)
	} else {
		sum := sha256.Sum256(body)
		payload = hex.EncodeToString(sum[:])
	}
	creds := aws.Credentials{AccessKeyID: sigv4Placeholder, SecretAccessKey: sigv4Placeholder}
	if presign {
		signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, payload, service, region, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if req.URL, err = url.Parse(signed); err != nil {
			t.Fatal(err)
		}
		return req
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, payload, service, region, time.Now()); err != nil {
		t.Fatal(err)
	}
	return req
}

// awsChunked encodes data as an aws-chunked body whose chunk signatures
// are the sandbox's: placeholders the proxy must replace.
func awsChunked(data []byte, size int) []byte {
	var b bytes.Buffer
	bogus := strings.Repeat("0", 64)
	for len(data) > 0 {
		n := min(size, len(data))
		fmt.Fprintf(&b, "%x;chunk-signature=%s\r\n", n, bogus)
		b.Write(data[:n])
		b.WriteString("\r\n")
		data = data[n:]
	}
	fmt.Fprintf(&b, "0;chunk-signature=%s\r\n\r\n", bogus)
	return b.Bytes()
}

// TestServerSigV4 sends requests signed with the placeholder keys through
// the proxy to a stand-in that verifies SigV4 with the real key: each
// allowed one is accepted, whatever its payload form; a refused one is
// never signed nor sent; a body unlike its declared hash never reaches
// the upstream whole; and no output (response echoes, logs, metrics)
// holds the secret access key, the session token or a signature the
// proxy computed.
func TestServerSigV4(t *testing.T) {
	h, s := newSigV4Harness(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), (maxHashedBody/16)+4096)
	bigSum := sha256.Sum256(big)
	small := []byte("hello, bucket")
	chunked := awsChunked(big[:200000], 65536)
	type want struct {
		status  int
		refused policy.Reason
		reached bool
	}
	cases := map[string]struct {
		req  func() *http.Request
		want want
	}{
		"put with the body's hash": {func() *http.Request {
			sum := sha256.Sum256(small)
			return sandboxSigned(t, "PUT", "https://s3.us-east-1.amazonaws.com/bucket/a.txt", hex.EncodeToString(sum[:]), small, "s3", "us-east-1", false, nil)
		}, want{200, "", true}},
		"put with a wrong hash on a short body is signed with the right one": {func() *http.Request {
			return sandboxSigned(t, "PUT", "https://s3.us-east-1.amazonaws.com/bucket/b.txt", strings.Repeat("ab", 32), small, "s3", "us-east-1", false, nil)
		}, want{200, "", true}},
		"put of a long body streams under its hash": {func() *http.Request {
			return sandboxSigned(t, "PUT", "https://s3.us-east-1.amazonaws.com/bucket/big", hex.EncodeToString(bigSum[:]), big, "s3", "us-east-1", false, nil)
		}, want{200, "", true}},
		"put of a long body unlike its hash is refused": {func() *http.Request {
			return sandboxSigned(t, "PUT", "https://s3.us-east-1.amazonaws.com/bucket/big", strings.Repeat("ab", 32), big, "s3", "us-east-1", false, nil)
		}, want{403, policy.ReasonL7NotAllowed, false}},
		"unsigned payload": {func() *http.Request {
			return sandboxSigned(t, "PUT", "https://s3.us-east-1.amazonaws.com/bucket/c.txt", unsignedPayload, small, "s3", "us-east-1", false, nil)
		}, want{200, "", true}},
		"aws-chunked upload has its chunks re-signed": {func() *http.Request {
			return sandboxSigned(t, "PUT", "https://s3.us-east-1.amazonaws.com/bucket/chunked", streamingSigned, chunked, "s3", "us-east-1", false,
				map[string]string{"Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": "200000"})
		}, want{200, "", true}},
		"a short aws-chunked upload with no Content-Type": {func() *http.Request {
			return sandboxSigned(t, "PUT", "https://s3.us-east-1.amazonaws.com/bucket/short", streamingSigned, awsChunked(small, 4), "s3", "us-east-1", false,
				map[string]string{"Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": strconv.Itoa(len(small))})
		}, want{200, "", true}},
		"signed trailer is refused": {func() *http.Request {
			return sandboxSigned(t, "PUT", "https://s3.us-east-1.amazonaws.com/bucket/t", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", chunked, "s3", "us-east-1", false,
				map[string]string{"Content-Encoding": "aws-chunked"})
		}, want{403, policy.ReasonL7NotAllowed, false}},
		"get": {func() *http.Request {
			return sandboxSigned(t, "GET", "https://s3.us-east-1.amazonaws.com/bucket/a.txt?versionId=1&x-id=GetObject", "", nil, "s3", "us-east-1", false, nil)
		}, want{200, "", true}},
		"presigned get": {func() *http.Request {
			return sandboxSigned(t, "GET", "https://s3.us-east-1.amazonaws.com/bucket/a%20b.txt?X-Amz-Expires=300", unsignedPayload, nil, "s3", "us-east-1", true, nil)
		}, want{200, "", true}},
		"delete is refused and never signed": {func() *http.Request {
			return sandboxSigned(t, "DELETE", "https://s3.us-east-1.amazonaws.com/bucket/a.txt", "", nil, "s3", "us-east-1", false, nil)
		}, want{403, policy.ReasonL7NotAllowed, false}},
		"bedrock invoke, no content hash header": {func() *http.Request {
			return sandboxSigned(t, "POST", "https://bedrock-runtime.us-west-2.amazonaws.com/model/anthropic.claude-v2:1/invoke", "", []byte(`{"prompt":"hi"}`), "bedrock", "us-west-2", false,
				map[string]string{"Content-Type": "application/json"})
		}, want{200, "", true}},
	}
	var outputs []string
	client := h.client()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before, _ := s.seen()
			resp, err := client.Do(c.req())
			if err != nil {
				t.Fatal(err)
			}
			body := readBody(t, resp)
			outputs = append(outputs, body, fmt.Sprint(resp.Header))
			_, failures := s.seen()
			if resp.StatusCode != c.want.status || policy.Reason(resp.Header.Get(policy.RefusedHeader)) != c.want.refused {
				t.Fatalf("%s %q, want %d %q: %s (stand-in: %v)", resp.Status, resp.Header.Get(policy.RefusedHeader), c.want.status, c.want.refused, body, failures)
			}
			if reached := s.verifiedSince(len(before)); reached != c.want.reached {
				t.Fatalf("reached the upstream verified: %v, want %v (stand-in: %v)", reached, c.want.reached, failures)
			}
			if c.want.reached {
				if !strings.Contains(body, "Signature="+strings.Repeat("*", 64)) || !strings.Contains(body, "Credential="+strings.Repeat("*", len(sigv4KeyID))) {
					t.Errorf("the echo is not masked: %s", body)
				}
				if e := resp.Header.Get("X-Echo"); !strings.Contains(e, "Signature=[REDACTED]") {
					t.Errorf("the echoed header is not masked: %s", e)
				}
			}
		})
	}
	got, _ := s.seen()
	for _, g := range got {
		if strings.Contains(g.URI, "X-Amz-Signature") || strings.Contains(g.Header.Get("Authorization"), sigv4Placeholder) {
			t.Errorf("the upstream got the sandbox's signature: %s %v", g.URI, g.Header)
		}
		if g.Method == "DELETE" {
			t.Errorf("a refused DELETE reached the upstream")
		}
		_, sig, _ := strings.Cut(g.Header.Get("Authorization"), "Signature=")
		outputs = append(outputs, h.logs.String(), h.get("/metrics"))
		for _, out := range outputs {
			for _, leak := range []string{sigv4Secret, canary, sig} {
				if leak != "" && strings.Contains(out, leak) {
					t.Fatalf("an output holds the secret key, the session token or a signature: %q", out)
				}
			}
		}
	}
}

// TestServerSigV4Rotation signs with the key the Secret holds at each
// request: after a rotation the stand-in accepts only the new key, and
// the proxy uses it without a restart. A Secret that loses the key
// refuses with credential-unavailable, counted, and sends nothing.
func TestServerSigV4Rotation(t *testing.T) {
	h, s := newSigV4Harness(t)
	client := h.client()
	get := func() *http.Response {
		t.Helper()
		resp, err := client.Do(sandboxSigned(t, "GET", "https://s3.us-east-1.amazonaws.com/bucket/a.txt", "", nil, "s3", "us-east-1", false, nil))
		if err != nil {
			t.Fatal(err)
		}
		readBody(t, resp)
		return resp
	}
	if resp := get(); resp.StatusCode != 200 {
		t.Fatalf("before rotation: %s", resp.Status)
	}
	s.mu.Lock()
	s.key = "ROTATED-" + canary
	s.mu.Unlock()
	h.secrets.write(map[string]string{"AWS_ACCESS_KEY_ID": sigv4KeyID, "AWS_SECRET_ACCESS_KEY": "ROTATED-" + canary, "AWS_SESSION_TOKEN": "SESSION-" + canary})
	eventually(t, "the rotated key signs", func() bool { return get().StatusCode == 200 })
	before, _ := s.seen()
	h.secrets.write(map[string]string{"AWS_ACCESS_KEY_ID": sigv4KeyID, "AWS_SESSION_TOKEN": "SESSION-" + canary})
	var resp *http.Response
	eventually(t, "a missing key refuses", func() bool {
		resp = get()
		return resp.StatusCode == http.StatusBadGateway
	})
	if r := resp.Header.Get(policy.RefusedHeader); r != string(policy.ReasonCredentialUnavailable) {
		t.Errorf("refused with %q, want credential-unavailable", r)
	}
	after, _ := s.seen()
	if len(after) > len(before)+1 { // the one before the change was seen
		t.Errorf("requests without the key reached the upstream")
	}
	if m := h.get("/metrics"); !strings.Contains(m, `keyhole_proxy_injection_failures_total{host="s3.us-east-1.amazonaws.com"}`) {
		t.Errorf("metrics do not count the failure:\n%s", m)
	}
}
