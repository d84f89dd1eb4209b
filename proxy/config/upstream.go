package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// UpstreamProxy is the forward proxy (a corporate egress proxy) the
// proxy reaches every upstream through: it opens each connection with
// HTTP CONNECT to it, and TLS to the real host runs inside the tunnel,
// verified as without one. Hosts NoProxy names are dialled directly.
type UpstreamProxy struct {
	// URL is the forward proxy, http://host:port: the proxy speaks plain
	// HTTP to it, as clients do to a proxy their HTTPS_PROXY names. It
	// holds no user information; credentials come from Auth.
	URL string `json:"url"`
	// Auth, when set, sends Proxy-Authorization: Basic from two keys of
	// a Secret, read at each connection as injections read theirs.
	Auth *BasicInjectSecret `json:"auth,omitempty"`
	// NoProxy lists the destinations dialled directly: a host name, a
	// domain written ".corp.example" (that domain's names, not the name
	// itself), or an address range in CIDR form, which an address
	// literal or, when Resolve is local, a resolved address falls in.
	NoProxy []string `json:"noProxy,omitempty"`
	// Resolve says who resolves a destination's name: ResolveLocal (the
	// default) resolves it here, checks each address as a direct dial
	// would and asks the forward proxy for the address it checked;
	// ResolveUpstream asks for the name, for clusters whose DNS cannot
	// resolve outside names, and refuses address literals and internal
	// names by rule instead (docs/proxy.md, "An upstream proxy").
	Resolve string `json:"resolve,omitempty"`
	// AllowInternalAddress lets the forward proxy's own address be an
	// internal one (loopback, private, link-local, shared, reserved), as
	// a proxy inside the cluster's network is. Without it that address
	// is checked like any destination's. It exempts that address only.
	AllowInternalAddress bool `json:"allowInternalAddress,omitempty"`
}

// BasicInjectSecret names a Secret and the two keys of a basic
// authentication: the user and the password.
type BasicInjectSecret struct {
	Secret      string `json:"secret"`
	UsernameKey string `json:"usernameKey"`
	PasswordKey string `json:"passwordKey"`
}

// The values UpstreamProxy.Resolve takes; empty means ResolveLocal.
const (
	ResolveLocal    = "local"
	ResolveUpstream = "upstream"
)

// Addr returns the forward proxy's host:port from a URL that Validate
// accepted; the port defaults to 80, as an http:// URL's does.
func (u *UpstreamProxy) Addr() string {
	p, err := url.Parse(u.URL)
	if err != nil {
		return ""
	}
	port := p.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(strings.ToLower(p.Hostname()), port)
}

// ResolvesLocally reports whether destination names are resolved by the
// proxy itself (ResolveLocal, the default).
func (u *UpstreamProxy) ResolvesLocally() bool { return u.Resolve != ResolveUpstream }

func (v *validator) upstreamProxy(at string, u *UpstreamProxy) {
	p, err := url.Parse(u.URL)
	switch {
	case err != nil:
		v.addf(at+".url", "is not a URL")
	case p.Scheme != "http":
		v.addf(at+".url", "has scheme %q; want http:// (the proxy speaks plain HTTP to a forward proxy and TLS inside its tunnels)", p.Scheme)
	case p.User != nil:
		v.addf(at+".url", "holds user information; name the credentials in auth, from a Secret")
	case p.Hostname() == "":
		v.addf(at+".url", "names no host")
	case p.Path != "" && p.Path != "/" || p.RawQuery != "" || p.Fragment != "":
		v.addf(at+".url", "has a path, query or fragment; want http://host:port")
	default:
		if port := p.Port(); port != "" {
			if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
				v.addf(at+".url", "has port %q, not one from 1 to 65535", port)
			}
		}
	}
	if a := u.Auth; a != nil {
		if err := CheckSecretName(a.Secret); err != nil {
			v.addf(at+".auth.secret", "%v", err)
		}
		v.key(at+".auth.usernameKey", a.UsernameKey)
		v.key(at+".auth.passwordKey", a.PasswordKey)
	}
	switch u.Resolve {
	case "", ResolveLocal, ResolveUpstream:
	default:
		v.addf(at+".resolve", "is %q; want %s or %s", u.Resolve, ResolveLocal, ResolveUpstream)
	}
	for i, e := range u.NoProxy {
		if err := checkNoProxy(e); err != nil {
			v.addf(fmt.Sprintf("%s.noProxy[%d]", at, i), "%v", err)
		}
	}
}

// checkNoProxy reports whether e is a noProxy entry: a canonical host
// name, a dot and one (a domain), or an address range in CIDR form.
func checkNoProxy(e string) error {
	if strings.Contains(e, "/") {
		if _, err := netip.ParsePrefix(e); err != nil {
			return fmt.Errorf("%q is not an address range in CIDR form", e)
		}
		return nil
	}
	if _, err := netip.ParseAddr(e); err == nil {
		return fmt.Errorf("%q is an address; write it as a range (%s/32 or /128)", e, e)
	}
	return CheckHostName(strings.TrimPrefix(e, "."))
}
