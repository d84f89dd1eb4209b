// Package proxylog reads what the benchmarks need from the JSON log of a
// keyhole-proxy they started: the addresses it bound.
package proxylog

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
)

// ErrNotListening is BoundAddrs' error while the log has no listening
// line yet.
var ErrNotListening = errors.New("not listening yet")

// BoundAddrs reads the proxy's "keyhole-proxy listening" line from the
// log file: the forward-proxy address and the admin address it bound.
func BoundAddrs(logFile string) (listen, admin string, err error) {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		var l struct {
			Msg    string `json:"msg"`
			Listen string `json:"listen"`
			Admin  string `json:"admin"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "keyhole-proxy listening" && l.Listen != "" && l.Admin != "" {
			return l.Listen, l.Admin, nil
		}
	}
	return "", "", ErrNotListening
}
