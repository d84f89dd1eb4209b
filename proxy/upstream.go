package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// An upstream proxy (config.UpstreamProxy) is a forward proxy, such as a
// corporate egress proxy, that every upstream connection goes through:
// the proxy asks it to CONNECT to the destination and runs TLS to the
// real host inside that tunnel, verified exactly as on a direct
// connection. What the forward proxy is asked for passes the same guard
// as a direct dial (docs/proxy.md, "An upstream proxy"):
//
//   - resolve: local (the default) resolves the destination here, checks
//     every address it resolves to (policy.DecideDial) and asks the
//     forward proxy for the checked address, never the name, so that
//     what was checked is what is reached;
//   - resolve: upstream asks for the name, for clusters whose DNS cannot
//     resolve outside names. The proxy cannot see the address then; it
//     refuses by rule what it can tell is internal: an address literal
//     in an internal range, a name spelling an address in a form
//     resolvers read as one (2130706433, 0x7f.1), and the names
//     internalName lists, unless the config lists the host in
//     internalHosts. Where a public name leads is the forward proxy's
//     to guard.
//
// A failure of the forward proxy (unreachable, a 407, a refused CONNECT,
// a timeout) is a refusal with reason upstream-proxy-failed, logged with
// its cause and counted in keyhole_proxy_upstream_proxy_connects_total.

// Causes of an upstream proxy failure, the result label of the connects
// metric besides "ok".
const (
	upCauseUnreachable     = "unreachable"
	upCauseTimeout         = "timeout"
	upCauseAuth            = "auth-required"
	upCauseRefused         = "connect-refused"
	upCauseCredential      = "credential-unavailable"
	upCauseAddressRefused  = "proxy-address-refused"
	upCauseMalformedAnswer = "malformed-answer"
)

// classInternalName is the address class of a name refused by rule in
// resolve: upstream mode, where no address is known.
const classInternalName policy.AddrClass = "internal-name"

// maxProxyAnswer bounds the forward proxy's answer to a CONNECT.
const maxProxyAnswer = 16 << 10

// viaUpstream reports whether the destination h (a name without its
// trailing dot, or an address literal) goes through the forward proxy:
// no noProxy entry names it. A range entry is matched against an address
// literal here; resolved addresses are matched in dialUpstream.
func viaUpstream(up *config.UpstreamProxy, h string) bool {
	a, err := netip.ParseAddr(h)
	for _, e := range up.NoProxy {
		switch {
		case strings.Contains(e, "/"):
			if p, perr := netip.ParsePrefix(e); perr == nil && err == nil && p.Contains(a.Unmap()) {
				return false
			}
		case strings.HasPrefix(e, "."):
			if strings.HasSuffix(h, e) {
				return false
			}
		case h == e:
			return false
		}
	}
	return true
}

// noProxyAddr reports whether a resolved address falls in a noProxy
// range, and is then dialled directly.
func noProxyAddr(up *config.UpstreamProxy, a netip.Addr) bool {
	for _, e := range up.NoProxy {
		if p, err := netip.ParsePrefix(e); err == nil && p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

// internalName reports whether name, which the proxy does not resolve in
// resolve: upstream mode, is one that names an internal host by rule: a
// single label (the search list's), localhost, the special-use and
// private-use domains (RFC 6761, RFC 6762, RFC 8375, the .internal TLD),
// the cluster's own (svc, cluster.local) and the reverse-lookup zones;
// or a name that spells an address in a form inet_aton reads (its last
// label all digits, or any label 0x-prefixed).
func internalName(name string) bool {
	if !strings.Contains(name, ".") {
		return true
	}
	labels := strings.Split(name, ".")
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return true
	}
	for _, l := range labels {
		if strings.HasPrefix(l, "0x") {
			return true
		}
	}
	for _, suffix := range []string{"localhost", "local", "localdomain", "internal", "intranet", "lan", "home.arpa",
		"svc", "cluster.local", "in-addr.arpa", "ip6.arpa", "test", "invalid"} {
		if name == suffix || strings.HasSuffix(name, "."+suffix) {
			return true
		}
	}
	return false
}

// dialUpstream connects to addr through the forward proxy, or directly
// when noProxy covers it (direct false: the caller dials as usual). host
// is the destination as decisions name it; guard is false when --resolve
// gave addr as an address literal, the operator's own choice.
func (s *Server) dialUpstream(ctx context.Context, st *state, host, addr string, guard bool) (c net.Conn, direct bool, err error) {
	up := st.cfg.UpstreamProxy
	h, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false, err
	}
	h = strings.TrimSuffix(h, ".")
	if !viaUpstream(up, h) {
		return nil, true, nil
	}
	p := st.policy
	if a, err := netip.ParseAddr(h); err == nil {
		if guard {
			if d, class := p.DecideDial(host, a); !d.Allowed() {
				return nil, false, &dialRefusedError{d: d, class: class}
			}
		}
		c, err := s.connectVia(ctx, st, host, net.JoinHostPort(a.String(), port))
		return c, false, err
	}
	if !up.ResolvesLocally() {
		if guard && internalName(h) && !p.InternalHost(host) {
			d := policy.Refusal(policy.ReasonHostNotAllowed, host, "%s names an internal host, and the proxy asks its upstream proxy for names it cannot resolve itself only when they are public; list the host in internalHosts to allow it", policy.Clip(host))
			return nil, false, &dialRefusedError{d: d, class: classInternalName}
		}
		c, err := s.connectVia(ctx, st, host, net.JoinHostPort(h, port))
		return c, false, err
	}
	name := h
	if strings.Contains(h, ".") {
		name += "." // fully qualified, as rooted writes it
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", name)
	if err != nil {
		return nil, false, err
	}
	// Every address must pass, not only the one reached: the forward
	// proxy is asked for one address, and a name that resolves to a
	// public and an internal one is refused whichever comes first.
	for _, a := range addrs {
		if d, class := p.DecideDial(host, a.Unmap()); !d.Allowed() {
			return nil, false, &dialRefusedError{d: d, class: class}
		}
	}
	var last error
	for _, a := range addrs {
		target := net.JoinHostPort(a.Unmap().String(), port)
		if noProxyAddr(up, a) {
			d := net.Dialer{Timeout: s.opts.Timeouts.Dial, KeepAlive: 30 * time.Second}
			c, err = d.DialContext(ctx, "tcp", target)
		} else {
			c, err = s.connectVia(ctx, st, host, target)
		}
		if err == nil {
			return c, false, nil
		}
		if _, refused := refusedDial(err); refused || ctx.Err() != nil {
			return nil, false, err
		}
		last = err
	}
	if last == nil {
		last = fmt.Errorf("%s resolves to no address", h)
	}
	return nil, false, last
}

// connectVia opens a tunnel to target (host:port) through the forward
// proxy. Its failures are *dialRefusedError with reason
// upstream-proxy-failed and a cause; their messages never hold the
// proxy's credentials, nor anything the forward proxy answered but its
// status code.
func (s *Server) connectVia(ctx context.Context, st *state, host, target string) (net.Conn, error) {
	up := st.cfg.UpstreamProxy
	proxyAddr := up.Addr()
	fail := func(cause, format string, args ...any) error {
		s.metrics.upstreamProxy(cause)
		d := policy.Refusal(policy.ReasonUpstreamProxyFailed, host, "the upstream proxy %s %s", proxyAddr, fmt.Sprintf(format, args...))
		return &dialRefusedError{d: d, class: policy.AddrClass(cause), cause: cause}
	}
	var auth string
	if a := up.Auth; a != nil {
		user, err := st.secrets.Lookup(a.Secret, a.UsernameKey)
		if err != nil {
			return nil, fail(upCauseCredential, "needs credentials keyhole cannot read: %v", err)
		}
		pass, err := st.secrets.Lookup(a.Secret, a.PasswordKey)
		if err != nil {
			return nil, fail(upCauseCredential, "needs credentials keyhole cannot read: %v", err)
		}
		auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(user.Reveal()+":"+pass.Reveal()))
	}
	d := net.Dialer{Timeout: s.opts.Timeouts.Dial, KeepAlive: 30 * time.Second}
	if !up.AllowInternalAddress {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil || policy.ClassifyAddr(ap.Addr()) != policy.AddrPublic {
				return errProxyAddrInternal
			}
			return nil
		}
	}
	conn, err := d.DialContext(ctx, "tcp", rooted(proxyAddr))
	switch {
	case errors.Is(err, errProxyAddrInternal):
		return nil, fail(upCauseAddressRefused, "is at an internal address, and the config's upstreamProxy does not set allowInternalAddress")
	case err != nil && isTimeout(err):
		return nil, fail(upCauseTimeout, "did not answer within %s", s.opts.Timeouts.Dial)
	case err != nil:
		return nil, fail(upCauseUnreachable, "cannot be reached")
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	conn.SetDeadline(time.Now().Add(s.opts.Timeouts.Dial))
	var b strings.Builder
	b.WriteString("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n")
	if auth != "" {
		b.WriteString("Proxy-Authorization: " + auth + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		conn.Close()
		if isTimeout(err) {
			return nil, fail(upCauseTimeout, "did not answer within %s", s.opts.Timeouts.Dial)
		}
		return nil, fail(upCauseUnreachable, "closed the connection")
	}
	br := bufio.NewReaderSize(&cappedReader{r: conn, n: maxProxyAnswer}, 4<<10)
	res, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		if isTimeout(err) || ctx.Err() != nil {
			return nil, fail(upCauseTimeout, "did not answer the CONNECT within %s", s.opts.Timeouts.Dial)
		}
		return nil, fail(upCauseMalformedAnswer, "did not answer the CONNECT with an HTTP response")
	}
	if res.StatusCode/100 != 2 {
		conn.Close()
		if res.StatusCode == http.StatusProxyAuthRequired {
			if auth == "" {
				return nil, fail(upCauseAuth, "asks for credentials (407), and the config's upstreamProxy names no auth")
			}
			return nil, fail(upCauseAuth, "refused the credentials of Secret %s (407)", up.Auth.Secret)
		}
		return nil, fail(upCauseRefused, "refused to CONNECT to %s (%d)", policy.Clip(target), res.StatusCode)
	}
	conn.SetDeadline(time.Time{})
	if ctx.Err() != nil {
		conn.Close()
		return nil, ctx.Err()
	}
	s.metrics.upstreamProxy("ok")
	if br.Buffered() > 0 {
		// Nothing should follow the answer before the TLS handshake
		// starts; what did is the destination's, and is kept.
		rest, _ := br.Peek(br.Buffered())
		return &prefixConn{Conn: conn, r: io.MultiReader(bytes.NewReader(rest), conn)}, nil
	}
	return conn, nil
}

var errProxyAddrInternal = errors.New("the upstream proxy's address is internal")

// cappedReader reads at most n bytes from r, then reports an error.
type cappedReader struct {
	r io.Reader
	n int
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errors.New("answer too long")
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= n
	return n, err
}
