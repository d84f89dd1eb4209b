package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// A host whose injection is AWSSigV4 gets requests the sandbox's SDK
// signed with placeholder keys (docs/spec.md §3.4). The proxy verifies
// nothing of that signature: it strips it, the request is decided by the
// host's rules as any other, and only an allowed request is signed, here,
// with the key held in the Secret, for the region and service the config
// names. The payload hash the request is signed with is the one its
// body has: the client's X-Amz-Content-Sha256 when the body streamed
// upstream matches it, which the body's reader checks as it goes.

// The payload hashes X-Amz-Content-Sha256 may name instead of a body's
// SHA-256.
const (
	unsignedPayload        = "UNSIGNED-PAYLOAD"
	streamingUnsignedTrail = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	streamingSigned        = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
)

// emptyPayloadHash is the SHA-256 of no bytes.
const emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// maxHashedBody bounds the body the proxy reads whole to hash it: one
// without an X-Amz-Content-Sha256, or short enough that hashing it
// costs less than trusting the client's hash. It is what the proxy
// reads of a body for a rule (readBodyHead), in the same slots. Longer
// bodies stream.
const maxHashedBody = policy.MaxBodyCheck

// awsAuthQuery are the query parameters of a presigned request's
// signature (SigV4's query form), which the proxy strips, in any letter
// case, like the Authorization header.
func awsAuthQuery() []string {
	return []string{"X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token"}
}

// awsAuthHeaders are the request headers that carry a SigV4 signature
// or are set by the signer: the sandbox's copies never go upstream.
func awsAuthHeaders() []string {
	return []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"}
}

// errSigV4 is wrapped when a request cannot be signed as it stands: a
// payload form the proxy does not sign, or a body that does not match
// the hash it was signed with. It is a refusal, never a forward.
var errSigV4 = errors.New("cannot sign the request")

// errAnswered is a request the body reader has already answered.
var errAnswered = errors.New("the request was answered")

// sigV4Refusal is a request the proxy refuses to sign; the message
// says why and names no secret.
type sigV4Refusal struct{ msg string }

func (e *sigV4Refusal) Error() string { return e.msg }
func (e *sigV4Refusal) Unwrap() error { return errSigV4 }

// signAWS strips the sandbox's signature from r, an allowed request to a
// host of hp whose injection is AWSSigV4, and signs it with the key the
// Secret holds, read through lookup now (so a rotated key is used from
// the next request on). It may replace r.Body with a reader that
// re-signs aws-chunked uploads or checks the body against the hash it
// was signed with. It returns what the response must be scrubbed of.
// Errors wrap ErrCredentialUnavailable (the key cannot be read) or
// errSigV4 (a *sigV4Refusal); r must not be sent then.
//
// readHead reads the head of r's body, at most maxHashedBody+1 bytes,
// for a body the proxy hashes whole; an error from it is returned as is.
//
// workload gives the proxy's own credentials, for an injection of
// identity workload, which reads no Secret.
func signAWS(r *http.Request, hp *policy.HostPolicy, lookup SecretLookup, workload func() (aws.Credentials, error), now time.Time, readHead func() ([]byte, error)) (Injected, error) {
	a := hp.Inject.AWSSigV4
	var inj Injected
	read := func(key string) (string, error) {
		s, err := lookup(hp.Inject.Secret, key)
		if err != nil {
			return "", err
		}
		inj.addEncoded(s.v)
		return s.Reveal(), nil
	}
	var akid, secret, token string
	var err error
	if a.Identity == config.IdentityWorkload {
		c, err := workload()
		if err != nil {
			return Injected{}, err
		}
		akid, secret, token = c.AccessKeyID, c.SecretAccessKey, c.SessionToken
		for _, v := range []string{akid, secret, token} {
			inj.addEncoded(v)
		}
	} else {
		if akid, err = read(a.AccessKeyIDKey); err != nil {
			return Injected{}, err
		}
		if secret, err = read(a.SecretAccessKeyKey); err != nil {
			return Injected{}, err
		}
		if a.SessionTokenKey != "" {
			if token, err = read(a.SessionTokenKey); err != nil {
				return Injected{}, err
			}
		}
	}
	auth := ParseAWSAuth(r.Header, r.URL.RawQuery)
	stripAWSAuth(r)

	payload, err := payloadHash(r, a.Service, readHead)
	if err != nil {
		return Injected{}, err
	}
	creds := aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret, SessionToken: token}
	sig, err := signHeaders(r, auth.SignedHeaders, creds, payload, a, now)
	if err != nil {
		return Injected{}, err
	}
	inj.add(sig)
	if payload == streamingSigned {
		seed, _ := hex.DecodeString(sig)
		r.Body = newChunkSigner(r.Body, v4.NewStreamSigner(creds, a.Service, a.Region, seed), now)
	}
	return inj, nil
}

// stripAWSAuth removes the sandbox's signature: its Authorization,
// X-Amz-Date and X-Amz-Security-Token headers (in any letter case, with
// '_' for '-') and the query form's X-Amz-* parameters.
func stripAWSAuth(r *http.Request) {
	for _, name := range awsAuthHeaders() {
		for k := range r.Header {
			if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), name) {
				delete(r.Header, k)
			}
		}
	}
	q := cleanQuery(r.URL.RawQuery)
	if q == "" {
		r.URL.RawQuery = ""
		return
	}
	var kept []string
	for part := range strings.SplitSeq(q, "&") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil && slices.ContainsFunc(awsAuthQuery(), func(a string) bool { return strings.EqualFold(a, n) }) {
			continue
		}
		kept = append(kept, part)
	}
	r.URL.RawQuery = strings.Join(kept, "&")
	r.URL.ForceQuery = false
}

// payloadHash returns the payload hash r is signed with, and makes r's
// body the one that hash is of. A body short enough is read and hashed
// whatever the client said; a longer one streams, checked against the
// client's hash as it goes; one with no hash to trust is refused, but on
// S3, which takes UNSIGNED-PAYLOAD. The aws-chunked forms are signed as
// they are named: STREAMING-AWS4-HMAC-SHA256-PAYLOAD has its chunks
// re-signed (chunkSigner), STREAMING-UNSIGNED-PAYLOAD-TRAILER goes as
// sent; the signed-trailer and ECDSA forms are refused.
func payloadHash(r *http.Request, service string, readHead func() ([]byte, error)) (string, error) {
	var declared string
	for k, vv := range r.Header {
		if strings.EqualFold(strings.ReplaceAll(k, "_", "-"), "X-Amz-Content-Sha256") {
			if len(vv) > 0 && declared == "" {
				declared = vv[0]
			}
			delete(r.Header, k)
		}
	}
	set := func(v string) (string, error) {
		if declared != "" || isS3(service) {
			r.Header.Set("X-Amz-Content-Sha256", v)
		}
		return v, nil
	}
	switch {
	case declared == unsignedPayload, declared == streamingUnsignedTrail:
		return set(declared)
	case declared == streamingSigned:
		if !hasToken(r.Header.Values("Content-Encoding"), "aws-chunked") && r.Header.Get("X-Amz-Decoded-Content-Length") == "" {
			return "", &sigV4Refusal{"X-Amz-Content-Sha256 is " + streamingSigned + " but the request names neither Content-Encoding: aws-chunked nor X-Amz-Decoded-Content-Length"}
		}
		return set(declared)
	case strings.HasPrefix(declared, "STREAMING-"):
		return "", &sigV4Refusal{fmt.Sprintf("the proxy re-signs the chunks of %s and passes %s on, but cannot sign the upload form %s as it streams; have the client send one of those (or UNSIGNED-PAYLOAD)", streamingSigned, streamingUnsignedTrail, clipHeader(declared))}
	case declared != "" && !isHexHash(declared):
		return "", &sigV4Refusal{fmt.Sprintf("X-Amz-Content-Sha256 %q is neither a SHA-256 in hex nor a payload form the proxy signs", clipHeader(declared))}
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return set(emptyPayloadHash)
	}
	if r.ContentLength > 0 && r.ContentLength <= maxHashedBody || declared == "" {
		head, err := readHead()
		if err != nil {
			return "", err
		}
		if len(head) <= maxHashedBody {
			r.Body = replayBody(head, r.Body)
			sum := sha256.Sum256(head)
			return set(hex.EncodeToString(sum[:]))
		}
		r.Body = replayBody(head, r.Body)
		if declared == "" {
			if isS3(service) {
				return set(unsignedPayload)
			}
			return "", &sigV4Refusal{fmt.Sprintf("the body is longer than %d bytes and the request names no X-Amz-Content-Sha256: the proxy signs a body it has hashed and holds no more of one than that; have the client send the header", maxHashedBody)}
		}
	}
	r.Body = &hashCheckBody{r: r.Body, want: strings.ToLower(declared), h: sha256.New()}
	return set(strings.ToLower(declared))
}

// replayBody reads head, then the rest of rc.
func replayBody(head []byte, rc io.ReadCloser) io.ReadCloser {
	return struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), rc), rc}
}

func isS3(service string) bool {
	return service == "s3" || service == "s3-outposts" || service == "s3express"
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := range len(s) {
		if !policy.IsHex(s[i]) {
			return false
		}
	}
	return true
}

func hasToken(values []string, token string) bool {
	for _, v := range values {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// clipHeader shortens a value the sandbox sent for a message.
func clipHeader(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// signHeaders signs r with creds: the headers signed are host, those the
// sandbox's own signature covered and still present, Content-Type,
// Content-MD5 and every X-Amz-* header, so a header the transport adds on
// the way (Accept-Encoding, User-Agent) is outside the signature. It
// returns the signature.
func signHeaders(r *http.Request, clientSigned []string, creds aws.Credentials, payload string, a *config.AWSSigV4Inject, now time.Time) (string, error) {
	signed := func(k string) bool {
		lk := strings.ToLower(k)
		return strings.HasPrefix(lk, "x-amz-") || lk == "content-type" || lk == "content-md5" || slices.Contains(clientSigned, lk)
	}
	tmp := r.Clone(context.Background())
	tmp.Body = nil
	tmp.Header = http.Header{}
	for k, vv := range r.Header {
		if signed(k) {
			tmp.Header[k] = vv
		}
	}
	err := v4.NewSigner().SignHTTP(context.Background(), creds, tmp, payload, a.Service, a.Region, now, func(o *v4.SignerOptions) {
		// S3 signs the path as sent; every other service its
		// encoding once more.
		o.DisableURIPathEscaping = isS3(a.Service)
	})
	if err != nil {
		return "", fmt.Errorf("%w: %w: %w", ErrCredentialUnavailable, errSigV4, err)
	}
	for _, k := range []string{"Authorization", "X-Amz-Date", "X-Amz-Security-Token"} {
		if v := tmp.Header.Get(k); v != "" {
			r.Header.Set(k, v)
		}
	}
	r.URL.RawQuery = tmp.URL.RawQuery
	_, sig, ok := strings.Cut(tmp.Header.Get("Authorization"), "Signature=")
	if !ok || !isHexHash(sig) {
		return "", fmt.Errorf("%w: %w: the signer made no signature", ErrCredentialUnavailable, errSigV4)
	}
	return sig, nil
}

// AWSAuth is what a SigV4 signature on a request says, as ParseAWSAuth
// reads it: the proxy keeps only the list of headers it covered, to sign
// the same ones. Nothing of it is verified.
type AWSAuth struct {
	// Form is "header" (Authorization: AWS4-HMAC-SHA256 ...), "query"
	// (a presigned URL's X-Amz-* parameters) or "" (no SigV4 signature).
	Form string
	// SignedHeaders are the header names the signature covered, lower
	// case, as listed.
	SignedHeaders []string
}

// maxSignedHeaders bounds the names read from a SignedHeaders list.
const maxSignedHeaders = 128

// ParseAWSAuth reads the SigV4 signature of a request from its header h
// and raw query: the Authorization header's AWS4-HMAC-SHA256 form, or a
// presigned URL's X-Amz-SignedHeaders. Anything else reads as no
// signature. It never fails: a malformed signature is stripped like a
// well-formed one.
func ParseAWSAuth(h http.Header, rawQuery string) AWSAuth {
	for k, vv := range h {
		if !strings.EqualFold(k, "Authorization") {
			continue
		}
		for _, v := range vv {
			alg, rest, ok := strings.Cut(strings.TrimSpace(v), " ")
			if !ok || alg != "AWS4-HMAC-SHA256" {
				continue
			}
			for f := range strings.SplitSeq(rest, ",") {
				name, val, ok := strings.Cut(strings.TrimSpace(f), "=")
				if ok && name == "SignedHeaders" {
					return AWSAuth{Form: "header", SignedHeaders: signedHeaderList(val)}
				}
			}
			return AWSAuth{Form: "header"}
		}
	}
	if rawQuery == "" {
		return AWSAuth{}
	}
	for part := range strings.SplitSeq(rawQuery, "&") {
		name, val, _ := strings.Cut(part, "=")
		if !strings.EqualFold(name, "X-Amz-SignedHeaders") {
			continue
		}
		if v, err := url.QueryUnescape(val); err == nil {
			return AWSAuth{Form: "query", SignedHeaders: signedHeaderList(v)}
		}
		return AWSAuth{Form: "query"}
	}
	return AWSAuth{}
}

// signedHeaderList reads a SignedHeaders value: names separated by ';',
// kept when they are header names, lower-cased, at most
// maxSignedHeaders of them.
func signedHeaderList(v string) []string {
	var out []string
	for name := range strings.SplitSeq(v, ";") {
		if len(out) == maxSignedHeaders {
			break
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if name != "" && isHeaderName(name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

func isHeaderName(s string) bool {
	for i := range len(s) {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// hashCheckBody passes a body on while hashing it, holding its last byte
// back until the body has ended and its SHA-256 is the one the request
// was signed with: a body that differs never reaches the upstream whole,
// and Read fails instead.
type hashCheckBody struct {
	r    io.ReadCloser
	want string
	h    hash.Hash
	pend []byte // read and hashed, not yet passed on (at most one byte)
	buf  []byte
	eof  bool
	err  error
}

// Read implements io.Reader.
func (b *hashCheckBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if b.eof {
			if len(b.pend) == 0 {
				return 0, io.EOF
			}
			n := copy(p, b.pend)
			b.pend = b.pend[n:]
			return n, nil
		}
		if want := min(len(p)+1, 64<<10); cap(b.buf) < want {
			b.buf = make([]byte, 0, want)
		}
		buf := append(b.buf[:0], b.pend...)
		m, err := b.r.Read(buf[len(buf):cap(buf)])
		b.h.Write(buf[len(buf) : len(buf)+m])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			b.eof = true
			if got := hex.EncodeToString(b.h.Sum(nil)); got != b.want {
				b.err = &sigV4Refusal{"the request body's SHA-256 is not the X-Amz-Content-Sha256 it was signed with"}
				return 0, b.err
			}
			b.pend = buf
			continue
		}
		if err != nil {
			b.err = err
			return 0, err
		}
		if len(buf) <= 1 {
			b.pend = buf
			continue
		}
		n := copy(p, buf[:len(buf)-1])
		b.pend = append(b.pend[:0], buf[n:]...)
		return n, nil
	}
}

// Close closes the inbound body.
func (b *hashCheckBody) Close() error { return b.r.Close() }

// signAWSRequest signs r, an allowed request to a host whose injection is
// AWSSigV4, and returns what the response must be scrubbed of. When it
// cannot, it answers the request with a refusal and returns false: the
// key cannot be read (credential-unavailable, counted as an injection
// failure) or the request is not one the proxy signs (l7-not-allowed).
// A body found, as it streams, not to be what was signed fails the
// upstream request with an l7-not-allowed refusal (bodyRefusedError).
func (s *Server) signAWSRequest(w http.ResponseWriter, r *http.Request, d policy.Decision, st *state) (Injected, bool) {
	hp := d.HostPolicy()
	// A body hashed whole is read as a rule's body is: holding one of
	// the server's body-check slots, with Timeouts.ReadHeader to arrive.
	readHead := func() ([]byte, error) {
		head, ok := s.readBodyHead(w, r, hp.Name)
		if !ok {
			return nil, errAnswered
		}
		return head, nil
	}
	inj, err := signAWS(r, hp, st.secrets.Lookup, s.oauth.workloadAWS, time.Now(), readHead)
	var refusal *sigV4Refusal
	switch {
	case errors.Is(err, errAnswered):
		return Injected{}, false
	case errors.As(err, &refusal):
		d = policy.Refusal(policy.ReasonL7NotAllowed, d.Host, "%s", refusal.msg)
		d.Connection = hp.Connection
		writeRefusal(w, d, true)
		return Injected{}, false
	case err != nil:
		s.metrics.injectFailure(hp.Name)
		if errors.Is(err, errSigV4) {
			s.log.Warn("request not signed", "host", hp.Name, "connection", hp.Connection, "error", logText(err.Error()))
		}
		if hp.Inject.AWSSigV4.Identity == config.IdentityWorkload {
			s.log.Warn("no AWS credentials of the workload identity", "host", hp.Name, "connection", hp.Connection, "error", logText(err.Error()))
			d = policy.Refusal(policy.ReasonCredentialUnavailable, d.Host, "keyhole cannot obtain the AWS credentials of its workload identity for connection %s for %s; check the proxy's ServiceAccount and role", hp.Connection, hp.Name)
		} else {
			d = policy.Refusal(policy.ReasonCredentialUnavailable, d.Host, "keyhole cannot read the AWS access key of connection %s for %s; check the mounted Secret", hp.Connection, hp.Name)
		}
		d.Connection = hp.Connection
		writeRefusal(w, d, false)
		return Injected{}, false
	}
	if r.Body != nil && r.Body != http.NoBody {
		host, conn := d.Host, hp.Connection
		r.Body = &sigV4Body{ReadCloser: r.Body, refuse: func(msg string) error {
			d := policy.Refusal(policy.ReasonL7NotAllowed, host, "%s", msg)
			d.Connection = conn
			return &bodyRefusedError{d: d}
		}}
	}
	return inj, true
}

// sigV4Body turns a signing refusal its body's reader meets as it
// streams into the refusal the forwarder answers with.
type sigV4Body struct {
	io.ReadCloser
	refuse func(msg string) error
}

// Read implements io.Reader.
func (b *sigV4Body) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	var refusal *sigV4Refusal
	if errors.As(err, &refusal) {
		return n, b.refuse(refusal.msg)
	}
	return n, err
}
