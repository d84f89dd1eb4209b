// Package proxy is keyhole's runtime egress proxy: an HTTP/1.1 forward
// proxy that runs beside one sandbox, tunnels its passthrough hosts,
// terminates TLS for its injected hosts to set the real credential, and
// refuses everything else with X-Omnia-Egress-Refused.
//
// Its decisions come from proxy/policy, and each carries what the server
// applies. A tunnel, a CONNECT on the proxy listener or a redirected
// connection on the transparent one, is admitted in one function
// (admitTunnel), whose outcome is a refusal, a passthrough or an
// interception, and only an interception has a leaf minted. A request's
// header is made for the upstream at one point (prepareHeader), from its
// decision, but for a request the proxy signs with AWS SigV4, which is
// signed once it is otherwise ready to go (signAWSRequest, sigv4.go), and
// the framing rules of the two upstream clients live in framing.go.
package proxy
