//go:build !linux

package proxy

import "net"

// socketReadable cannot look into the socket on this platform; the TLS
// layer's check in idleClean still catches what has been read into it.
func socketReadable(net.Conn) bool { return false }
