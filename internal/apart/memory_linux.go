package apart

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
)

// boundMemory limits the process's address space to what it holds now
// and extra more: an allocation past it fails, which ends the process
// with "out of memory" on its standard error. The garbage collector is
// told of the bound, to collect before reaching it.
func boundMemory(extra int64) error {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("reading its address space: %w", err)
	}
	var size int64 = -1
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				size = kb << 10
			}
		}
	}
	if size < 0 {
		return errors.New("its address space's size is not in /proc/self/status")
	}
	limit := uint64(size + extra)
	if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		return fmt.Errorf("bounding its address space: %w", err)
	}
	debug.SetMemoryLimit(extra / 2)
	return nil
}
