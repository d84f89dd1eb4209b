package proxy

import (
	"net/http"
	"net/textproto"
	"strings"

	"keyhole.dev/keyhole/proxy/policy"
)

// prepareHeader makes h, the header of an allowed request, the header
// the upstream gets, from what the request's decision carries, and
// returns what the response must be scrubbed of. It is the one point
// where a request's header is edited for the upstream, for every path
// (an absolute-form request to a passthrough host, a request in an
// intercepted tunnel), after the decision. The hop-by-hop headers and
// every header Connection names are already gone: stripHopByHop runs
// as the request is read, before the decision, so that the header
// decided on is the header sent (Connection: Content-Type cannot drop a
// Content-Type a body rule was checked against) and nothing the sandbox
// names in Connection can remove the credential set here.
//
// For a decision that carries a host policy, Inject replaces the
// sandbox's own copies of the credential header (in any letter case,
// with '_' for '-') with the credential inject sets; then, for
// every request, the sandbox's forwarding headers are dropped and, when
// response bodies are scrubbed, the request asks for whole, uncompressed
// ones. On error, which wraps ErrCredentialUnavailable, h may be partly
// edited and must not be sent. A host whose injection is AWSSigV4 gets
// no credential here: a signature covers the method, the path, the query
// and the body's hash too, so its request is signed after, whole
// (signAWSRequest).
func prepareHeader(h http.Header, d policy.Decision, inject injector) (scrubbing, error) {
	var sc scrubbing
	if hp := d.HostPolicy(); hp != nil {
		inj, err := inject(hp, h)
		if err != nil {
			return scrubbing{}, err
		}
		sc = scrubbing{inj: inj, body: hp.ScrubResponseBodies()}
	}
	// The sandbox's forwarding headers are dropped, as ReverseProxy
	// did: none is added either.
	for _, k := range [...]string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
		delete(h, k)
	}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = []string{""} // no Go default
	}
	if sc.body {
		// A compressed body could hide the credential from the scrub.
		h["Accept-Encoding"] = []string{"identity"}
		if _, ok := h["Grpc-Accept-Encoding"]; ok {
			h["Grpc-Accept-Encoding"] = []string{"identity"} // gRPC's own
		}
		// So could a part of one: a range that cuts the credential, or
		// several ranges of one response, each piece in its own part
		// between multipart boundaries, each too short to be found.
		// Without Range the upstream sends the whole body, which the
		// scrub sees whole.
		deleteFold(h, "Range")
		deleteFold(h, "If-Range")
	}
	return sc, nil
}

// stripHopByHop removes the hop-by-hop headers and every header the
// Connection header names.
func stripHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	// The RFC 9110 connection-specific headers, plus the proxy ones.
	for _, k := range [...]string{
		"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
	} {
		h.Del(k)
	}
}

// deleteFold deletes name from h in any letter case.
func deleteFold(h http.Header, name string) {
	for k := range h {
		if strings.EqualFold(k, name) {
			delete(h, k)
		}
	}
}
