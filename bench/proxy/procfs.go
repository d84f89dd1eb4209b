package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTime returns the user plus system CPU time a process has used.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(data)
}

// parseStat reads utime and stime from a /proc/<pid>/stat line, in clock
// ticks of 10 ms (the Linux USER_HZ). The command name is in parentheses
// and may hold spaces and parentheses, so fields are counted from the last
// closing parenthesis: utime and stime are the 12th and 13th after it.
func parseStat(data []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("/proc stat: too few fields")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 32)
	st, err2 := strconv.ParseUint(f[12], 10, 32)
	if err1 != nil || err2 != nil {
		return 0, errors.New("/proc stat: utime or stime is not a number")
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// procStatus reads VmHWM (peak resident set) and VmRSS in KiB.
func procStatus(pid int) (hwm, rss int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(data)
}

// parseStatus reads the VmHWM and VmRSS lines ("VmHWM:   51234 kB") of a
// /proc/<pid>/status file.
func parseStatus(data []byte) (hwm, rss int64, err error) {
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var v uint64
		switch f[0] {
		case "VmHWM:", "VmRSS:":
			if v, err = strconv.ParseUint(f[1], 10, 62); err != nil {
				return 0, 0, fmt.Errorf("/proc status: %s is not a size: %w", f[0], err)
			}
		}
		switch f[0] {
		case "VmHWM:":
			hwm = int64(v)
		case "VmRSS:":
			rss = int64(v)
		}
	}
	if hwm == 0 {
		return 0, 0, errors.New("/proc status: no VmHWM")
	}
	return hwm, rss, nil
}
