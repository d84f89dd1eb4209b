//go:build e2e

package apiserver

import "syscall"

// procAttr makes the kernel kill etcd and kube-apiserver when the test
// binary dies (a timeout panic, a ^C), so no server outlives its test.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
