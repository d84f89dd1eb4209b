//go:build !linux

package proxy

import "net"

// socketPeek cannot look into a socket on this platform; idleClean's look
// at the TLS layer still catches what has been read into it.
type socketPeek struct{}

func newSocketPeek(net.Conn) *socketPeek { return &socketPeek{} }

func (*socketPeek) readable() bool { return false }
