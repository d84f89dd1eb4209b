package proxy

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
)

// soOriginalDst is SO_ORIGINAL_DST from linux/netfilter_ipv4.h: the
// destination a connection had before a nat REDIRECT rewrote it.
const soOriginalDst = 80

// originalDst reads a redirected IPv4 connection's original destination
// from conntrack. Transparent mode redirects IPv4 only; IPv6 egress of
// the sandbox is refused, not redirected (docs/proxy.md).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return netip.AddrPort{}, errors.New("not a socket")
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var dst netip.AddrPort
	var gerr error
	err = raw.Control(func(fd uintptr) {
		// The sockaddr_in comes back in the 16-byte Multiaddr of an
		// ipv6_mreq, the one getsockopt wrapper of that size: family
		// (2 bytes), port (big-endian), address.
		m, err := syscall.GetsockoptIPv6Mreq(int(fd), syscall.SOL_IP, soOriginalDst)
		if err != nil {
			gerr = fmt.Errorf("SO_ORIGINAL_DST: %w", err)
			return
		}
		a := m.Multiaddr
		dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte{a[4], a[5], a[6], a[7]}), uint16(a[2])<<8|uint16(a[3]))
	})
	if err == nil {
		err = gerr
	}
	return dst, err
}
