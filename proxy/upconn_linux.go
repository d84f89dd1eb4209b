package proxy

import (
	"net"
	"syscall"
)

// socketReadable reports whether c's socket has anything to read, a
// close included, without waiting and without consuming it: one
// recvfrom(MSG_PEEK|MSG_DONTWAIT). It answers true when it cannot tell.
func socketReadable(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var b [1]byte
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		_, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true
	}); err != nil {
		return true
	}
	return rerr != syscall.EAGAIN
}
