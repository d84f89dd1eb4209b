package policy

import (
	"net/netip"
)

// AddrClass says why an address is internal: one of the classes below,
// or AddrPublic for an address the proxy dials without an opt-in.
type AddrClass string

// The address classes. The proxy dials an internal address only for a
// host the config lists in internalHosts, or one --resolve maps to that
// address literally.
const (
	AddrPublic      AddrClass = "public"
	AddrLoopback    AddrClass = "loopback"    // 127.0.0.0/8, ::1
	AddrLinkLocal   AddrClass = "link-local"  // 169.254.0.0/16 (cloud metadata), fe80::/10
	AddrPrivate     AddrClass = "private"     // 10/8, 172.16/12, 192.168/16, fc00::/7 (fd00:ec2::254)
	AddrSharedCGNAT AddrClass = "cgnat"       // 100.64.0.0/10, carrier-grade NAT and some clusters' pods
	AddrUnspecified AddrClass = "unspecified" // 0.0.0.0/8, ::
	AddrMulticast   AddrClass = "multicast"   // 224.0.0.0/4, ff00::/8
	AddrReserved    AddrClass = "reserved"    // 192.0.0.0/24, 198.18.0.0/15, 240.0.0.0/4, fec0::/10
	AddrInvalid     AddrClass = "invalid"     // not an IP address
)

// internalPrefixes are the ranges netip has no predicate for.
var internalPrefixes = [...]struct {
	p     netip.Prefix
	class AddrClass
}{
	{netip.MustParsePrefix("0.0.0.0/8"), AddrUnspecified},
	{netip.MustParsePrefix("100.64.0.0/10"), AddrSharedCGNAT},
	{netip.MustParsePrefix("192.0.0.0/24"), AddrReserved},
	{netip.MustParsePrefix("198.18.0.0/15"), AddrReserved},
	{netip.MustParsePrefix("240.0.0.0/4"), AddrReserved},
	{netip.MustParsePrefix("fec0::/10"), AddrReserved},
}

// embedsIPv4 are IPv6 prefixes whose addresses carry an IPv4 address a
// gateway may reach for them: NAT64 (the last 32 bits) and 6to4 (bits 16
// to 47).
var (
	nat64      = netip.MustParsePrefix("64:ff9b::/96")
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour  = netip.MustParsePrefix("2002::/16")
)

// ClassifyAddr gives the class of an address the proxy is about to dial.
// An IPv4 address mapped into IPv6 (::ffff:127.0.0.1), or carried in a
// NAT64 or 6to4 address, is classified as the IPv4 address.
func ClassifyAddr(a netip.Addr) AddrClass {
	if !a.IsValid() {
		return AddrInvalid
	}
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a) || nat64Local.Contains(a):
			if c := ClassifyAddr(netip.AddrFrom4([4]byte(b[12:16]))); c != AddrPublic {
				return c
			}
		case sixToFour.Contains(a):
			if c := ClassifyAddr(netip.AddrFrom4([4]byte(b[2:6]))); c != AddrPublic {
				return c
			}
		}
	}
	switch {
	case a.IsLoopback():
		return AddrLoopback
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return AddrLinkLocal
	case a.IsPrivate():
		return AddrPrivate
	case a.IsUnspecified():
		return AddrUnspecified
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return AddrMulticast
	}
	for _, r := range internalPrefixes {
		if r.p.Contains(a) {
			return r.class
		}
	}
	return AddrPublic
}

// DecideDial gives the verdict on dialling addr for host (canonical, as
// a Decision names it): allowed for a public address, or for any address
// when the config lists host in internalHosts; else refused with
// host-not-allowed, the message naming the class. The proxy calls it on
// the address it is about to connect to, after name resolution, so a
// name that resolves to an internal address at dial time (DNS
// rebinding) is refused too.
func (p *Policy) DecideDial(host string, addr netip.Addr) (Decision, AddrClass) {
	class := ClassifyAddr(addr)
	if class == AddrPublic || class != AddrInvalid && p.internal[hostName(host)] {
		return Decision{Action: ActionForward, Reason: ReasonAllowed, Host: host}, class
	}
	return Refusal(ReasonHostNotAllowed, host, "%s resolves to %s, a %s address; the proxy dials internal addresses only for hosts the config lists in internalHosts", Clip(host), addr, class), class
}

// hostName drops a port from host:port.
func hostName(host string) string {
	for i := len(host) - 1; i >= 0; i-- {
		switch host[i] {
		case ':':
			return host[:i]
		case ']', '.':
			return host
		}
	}
	return host
}
