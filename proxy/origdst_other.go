//go:build !linux

package proxy

import (
	"errors"
	"net"
	"net/netip"
)

// originalDst needs Linux's conntrack: transparent mode is Linux only.
func originalDst(net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, errors.New("transparent mode needs Linux (SO_ORIGINAL_DST)")
}
