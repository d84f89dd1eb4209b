// Package netrules writes the packet-filter rules of transparent mode: in
// the sandbox pod's network namespace, every outbound TCP connection of
// any user but the proxy's is redirected to the proxy's transparent
// listener, and its DNS (UDP and TCP port 53, to any address) to the
// proxy's DNS listener; the proxy's admin port is refused to every user
// but the proxy's; UDP and everything else is refused; IPv6 egress is
// refused, not redirected, but for the kernel's neighbour discovery.
// docs/proxy.md says why each rule is there.
//
// The rules are iptables-restore input, applied by the Debian iptables
// package's iptables-restore and ip6tables-restore (nf_tables backend):
// generating them here keeps them a tested, deterministic value.
package netrules

import (
	"bytes"
	"errors"
	"fmt"
)

// Chain is the chain the rules add to the nat and filter tables; OUTPUT
// jumps to it.
const Chain = "KEYHOLE_OUTPUT"

// ErrInvalid wraps every error of a Config that cannot make rules.
var ErrInvalid = errors.New("invalid transparent-mode rules")

// Config is what the rules depend on.
type Config struct {
	// ProxyUID is the user the proxy runs as: its connections are the
	// only ones that leave the pod unredirected.
	ProxyUID int
	// Port is the proxy's transparent listener on 127.0.0.1.
	Port int
	// DNSPort is the proxy's DNS listener on 127.0.0.1 (UDP and TCP):
	// every other user's port 53 goes there, so no name the sandbox
	// looks up reaches the pod's resolvers.
	DNSPort int
	// AdminPort, when not 0, is the proxy's admin port: refused to
	// every other user of the pod, on any of its addresses. The
	// kubelet's probes come from outside the pod, which these rules
	// (on OUTPUT) do not see.
	AdminPort int
}

func (c Config) validate() error {
	if c.ProxyUID < 0 || c.ProxyUID > 1<<32-2 {
		return fmt.Errorf("%w: proxy UID %d", ErrInvalid, c.ProxyUID)
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("%w: port %d", ErrInvalid, c.Port)
	}
	if c.DNSPort < 1 || c.DNSPort > 65535 || c.DNSPort == 53 {
		return fmt.Errorf("%w: DNS port %d", ErrInvalid, c.DNSPort)
	}
	if c.AdminPort < 0 || c.AdminPort > 65535 {
		return fmt.Errorf("%w: admin port %d", ErrInvalid, c.AdminPort)
	}
	if c.DNSPort == c.Port || c.AdminPort == c.Port || c.AdminPort == c.DNSPort {
		return fmt.Errorf("%w: ports %d, %d and %d are not distinct", ErrInvalid, c.Port, c.DNSPort, c.AdminPort)
	}
	return nil
}

// IPv4 is the iptables-restore input for IPv4: the nat redirects and
// the filter that refuses what is not redirected.
func IPv4(c Config) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("# keyhole transparent mode, IPv4: docs/proxy.md")
	w("*nat")
	w(":%s - [0:0]", Chain)
	w("-A OUTPUT -p tcp -j %s", Chain)
	w("-A OUTPUT -p udp --dport 53 -j %s", Chain)
	w("-A %s -m owner --uid-owner %d -j RETURN", Chain, c.ProxyUID)
	// DNS to any address, loopback included, is the proxy's to answer.
	w("-A %s -p udp --dport 53 -j REDIRECT --to-ports %d", Chain, c.DNSPort)
	w("-A %s -p tcp --dport 53 -j REDIRECT --to-ports %d", Chain, c.DNSPort)
	w("-A %s -o lo -j RETURN", Chain)
	w("-A %s -p tcp -j REDIRECT --to-ports %d", Chain, c.Port)
	w("COMMIT")
	filter(&b, c, true, false, "icmp-admin-prohibited")
	return b.Bytes(), nil
}

// IPv6 is the ip6tables-restore input: no redirect, only the filter, so
// the sandbox's IPv6 egress, DNS included, is refused and clients fall
// back to IPv4. The kernel's neighbour discovery passes, without which
// no IPv6 address on the pod's link, its router's included, is reached,
// by the proxy either.
func IPv6(c Config) ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# keyhole transparent mode, IPv6: docs/proxy.md\n")
	filter(&b, c, false, true, "icmp6-adm-prohibited")
	return b.Bytes(), nil
}

// filter writes the filter table: the proxy's user passes; the admin
// port is refused to everyone else; loopback, the nat redirects'
// packets, replies to connections already allowed and packets the kernel
// makes itself pass; TCP is reset and the rest rejected.
//
// With ndisc, IPv6 neighbour discovery passes too: router solicitations
// and neighbour solicitations and advertisements with the hop limit 255
// that receivers require, which no router forwards. The kernel sends
// them from a socket of its own that belongs to no user, so neither the
// proxy's UID nor "! --socket-exists" lets them through, and refused
// they leave every IPv6 neighbour unresolved ("No route to host" for
// the proxy's own connections). Only a holder of NET_RAW, which the
// sandbox is not, can send such a packet itself, and it stays on the
// link.
func filter(b *bytes.Buffer, c Config, redirect, ndisc bool, reject string) {
	w := func(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }
	w("*filter")
	w(":%s - [0:0]", Chain)
	w("-A OUTPUT -j %s", Chain)
	w("-A %s -m owner --uid-owner %d -j RETURN", Chain, c.ProxyUID)
	if ndisc {
		for _, typ := range []string{"router-solicitation", "neighbour-solicitation", "neighbour-advertisement"} {
			w("-A %s -p ipv6-icmp -m icmp6 --icmpv6-type %s -m hl --hl-eq 255 -j RETURN", Chain, typ)
		}
	}
	if c.AdminPort != 0 {
		// Any address of the pod's own is routed over lo; an
		// outside address to this port was redirected by nat already.
		w("-A %s -o lo -p tcp --dport %d -j REJECT --reject-with tcp-reset", Chain, c.AdminPort)
	}
	w("-A %s -o lo -j RETURN", Chain)
	if redirect {
		// The nat redirects' packets: the filter still sees their
		// first route's interface, not lo.
		w("-A %s -d 127.0.0.1/32 -p tcp --dport %d -m conntrack --ctstate DNAT -j RETURN", Chain, c.Port)
		w("-A %s -d 127.0.0.1/32 -p udp --dport %d -m conntrack --ctstate DNAT -j RETURN", Chain, c.DNSPort)
		w("-A %s -d 127.0.0.1/32 -p tcp --dport %d -m conntrack --ctstate DNAT -j RETURN", Chain, c.DNSPort)
	}
	w("-A %s -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN", Chain)
	w("-A %s -m owner ! --socket-exists -j RETURN", Chain)
	w("-A %s -p tcp -j REJECT --reject-with tcp-reset", Chain)
	w("-A %s -j REJECT --reject-with %s", Chain, reject)
	w("COMMIT")
}
