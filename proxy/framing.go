package proxy

import "net/http"

// The framing rules of the proxy's two HTTP/1.1 clients to upstreams,
// the http.Transport and upPool's fast path: what a request is sent with,
// which client may carry it, and which connection may carry anything
// after it. Both clients take them from here.

// frameRequest frames out, the sandbox's request as it goes upstream:
// no trailers (they would reach the upstream unchecked, an override
// header among them, and no client of an API needs them), and no body
// when it declares none, which lets the transport retry it on a stale
// pooled connection. Any other body keeps the framing it came with,
// Content-Length or chunked. out.Close is left to closesAfter.
func frameRequest(out *http.Request) {
	out.Close = false
	out.Trailer = nil
	if out.ContentLength == 0 {
		out.Body = nil
	}
}

// fastPath reports whether the pool's fast path may carry out: a bodiless
// GET or HEAD to port 443, the only port a tunnel reaches. The fast path
// never sends a body, so no request it carries needs closesAfter's
// Connection: close for one.
func fastPath(out *http.Request) bool {
	return out.Body == nil && (out.Method == http.MethodGet || out.Method == http.MethodHead) && out.URL.Port() == ""
}

// closesAfter reports whether the upstream connection that carries req
// must carry nothing after it. A request body is bytes the sandbox
// chose: an upstream that answers without reading it (many ignore a
// GET's or a DELETE's body, any may answer an error first) reads them as
// the start of the next request on the connection, which would be one
// the proxy decided, credential included. And an upstream that answers
// HEAD with a body would leave it on the connection, to be read as the
// next request's response. The Transport sends such a request with
// Connection: close; the fast path, which never sends a body, closes
// the connection after a HEAD (reusable).
func closesAfter(req *http.Request) bool {
	return req.Method == http.MethodHead || req.Body != nil
}

// framedByItself reports whether a response's own framing
// (Content-Length, chunked) says where it ends. A response to HEAD, and a
// 204 or 304, ends at its header whatever its Content-Length says
// (RFC 9112 section 6.3); an upstream that sends a body anyway, as some
// send one with HEAD, leaves it on the connection, and it may arrive
// after the next request is written, when no check can tell it from the
// next response. Such a connection is closed, not reused.
func framedByItself(method string, status int) bool {
	return method != http.MethodHead && status != http.StatusNoContent && status != http.StatusNotModified
}

// reusable reports whether the connection that carried req and res may
// carry the next exchange once res's body is read to its end: neither
// side asked to close it, and res's own framing said where it ended.
func reusable(req *http.Request, res *http.Response) bool {
	return !closesAfter(req) && !res.Close && framedByItself(req.Method, res.StatusCode)
}
