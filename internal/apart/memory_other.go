//go:build !linux

package apart

import "runtime/debug"

// boundMemory tells the garbage collector of the bound. Only Linux
// bounds an address space, so elsewhere a rendering past it is slowed by
// collections, not ended.
func boundMemory(extra int64) error {
	debug.SetMemoryLimit(extra / 2)
	return nil
}
