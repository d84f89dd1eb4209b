package proxy

import (
	"net"
	"syscall"
	"unsafe"
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
	readable := true
	err = rc.Control(func(fd uintptr) {
		var b [1]byte
		// MSG_DONTWAIT never blocks, so the raw call needs none of the
		// scheduler's bookkeeping for a call that may.
		_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		readable = errno != syscall.EAGAIN
	})
	return err != nil || readable
}
