package render

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"keyhole.dev/keyhole/proxy/config"
)

// What the proxy reaches at run time besides its upstreams and the API
// server: the cluster's forward proxy (Options.UpstreamProxy) and its
// OpenTelemetry collector (Options.OTLPEndpoint). Both belong to the
// cluster, not to the repository's Connections, so they are render
// options, as the upstream CA is. Each is written where the proxy reads
// it, and its port is opened in the sidecar pod's NetworkPolicy, which
// otherwise admits DNS and TCP 443 and 6443 only. Token endpoints need
// nothing here: the proxy reaches every host, a token endpoint too, on
// 443 (config.CheckTokenURL).

// EnvOTLPEndpoint is the variable the proxy reads its collector's base
// URL from (docs/proxy.md, "The request log over OTLP").
const EnvOTLPEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// checkUpstreamProxy accepts the forward proxy's URL as the proxy
// config's upstreamProxy.url takes it: http://host[:port], nothing else.
func checkUpstreamProxy(s string) error {
	u, err := checkURL(s, "http")
	if err != nil {
		return err
	}
	if u.Path != "" && u.Path != "/" {
		return errors.New("has a path; want http://host:port")
	}
	return nil
}

// checkOTLPEndpoint accepts a collector's base URL, http or https, to
// which the proxy appends /v1/logs.
func checkOTLPEndpoint(s string) error {
	_, err := checkURL(s, "http", "https")
	return err
}

// checkURL parses s as an absolute URL of one of schemes with a host, a
// valid port if any, and no user information, query or fragment; and
// refuses what a container's env or a JSON string would take otherwise
// than written ($(VAR) is expanded by the kubelet).
func checkURL(s string, schemes ...string) (*url.URL, error) {
	if strings.ContainsAny(s, " \t\r\n,'\"\\$") {
		return nil, errors.New("holds a space, comma, quote, backslash or dollar sign")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return nil, errors.New("is not a URL")
	case !slices.Contains(schemes, u.Scheme):
		return nil, fmt.Errorf("has scheme %q; want %s://", u.Scheme, strings.Join(schemes, ":// or "))
	case u.User != nil:
		return nil, errors.New("holds user information")
	case u.Hostname() == "":
		return nil, errors.New("names no host")
	case u.RawQuery != "" || u.Fragment != "" || u.Opaque != "":
		return nil, errors.New("has a query or fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("has port %q, not one from 1 to 65535", p)
		}
	}
	return u, nil
}

// shownURL is s as an error may show it: without a password, a query or
// a fragment, where a credential could sit; nothing of s when it is not
// a URL.
func shownURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(not a URL)"
	}
	u.RawQuery, u.Fragment = "", ""
	return strconv.Quote(u.Redacted())
}

// urlPort is the TCP port a URL that checkURL accepted is reached on.
func urlPort(s string) int {
	u, err := url.Parse(s)
	if err != nil {
		return 0
	}
	if p := u.Port(); p != "" {
		n, _ := strconv.Atoi(p)
		return n
	}
	if u.Scheme == "https" {
		return 443
	}
	return 80
}

// upstreamProxy is the proxy config's upstreamProxy for
// Options.UpstreamProxy, nil when it is empty. The forward proxy the
// cluster names is its own, at an internal address as a proxy in the
// cluster's network is: that address, and nothing else, is exempt from
// the internal-address checks.
func (o Options) upstreamProxy() *config.UpstreamProxy {
	if o.UpstreamProxy == "" {
		return nil
	}
	return &config.UpstreamProxy{URL: strings.TrimSuffix(o.UpstreamProxy, "/"), AllowInternalAddress: true}
}

// extraEgressPorts are the TCP ports the proxy needs beyond 443 and
// 6443, in ascending order without repeats: the forward proxy's and the
// collector's.
func (o Options) extraEgressPorts() []int {
	var ports []int
	if o.UpstreamProxy != "" {
		ports = append(ports, urlPort(o.UpstreamProxy))
	}
	if o.OTLPEndpoint != "" {
		ports = append(ports, urlPort(o.OTLPEndpoint))
	}
	slices.Sort(ports)
	ports = slices.Compact(ports)
	return slices.DeleteFunc(ports, func(p int) bool { return p == 443 || p == 6443 })
}

// proxyEnv sets the proxy container's environment: the collector's base
// URL when there is one.
func (w *manifestWriter) proxyEnv(c ymap) {
	if w.opts.OTLPEndpoint == "" {
		return
	}
	v := c.seq("env").mapping()
	v.str("name", EnvOTLPEndpoint)
	v.str("value", w.opts.OTLPEndpoint)
}
