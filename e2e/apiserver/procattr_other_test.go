//go:build e2e && !linux

package apiserver

import "syscall"

// procAttr has no parent-death signal outside Linux; stop still ends the
// servers when the tests finish normally.
func procAttr() *syscall.SysProcAttr { return nil }
