package proxy

import (
	"net"
	"syscall"
	"unsafe"
)

// socketPeek looks into one connection's socket without waiting and
// without consuming anything. Made once per connection, it costs no
// allocation per look.
type socketPeek struct {
	rc    syscall.RawConn
	look  func(fd uintptr)
	found bool
}

// newSocketPeek returns a socketPeek for c, or nil when c has no socket.
func newSocketPeek(c net.Conn) *socketPeek {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	p := &socketPeek{rc: rc}
	p.look = func(fd uintptr) {
		var b [1]byte
		// MSG_DONTWAIT never blocks, so the raw call needs none of the
		// scheduler's bookkeeping for a call that may.
		_, _, errno := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		p.found = errno != syscall.EAGAIN
	}
	return p
}

// readable reports whether the socket has anything to read, a close
// included: one recvfrom(MSG_PEEK|MSG_DONTWAIT). It answers true when it
// cannot tell.
func (p *socketPeek) readable() bool {
	if p == nil {
		return true
	}
	p.found = true
	if err := p.rc.Control(p.look); err != nil {
		return true
	}
	return p.found
}
