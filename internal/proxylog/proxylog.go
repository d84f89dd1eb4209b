// Package proxylog reads what the tests and benchmarks that start a
// keyhole-proxy need from its JSON log: the addresses it bound. They
// start it on port 0, so that nothing can take a port between choosing
// and binding it, and learn the ports from its listening line.
package proxylog

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
)

// ErrNotListening is Bound's error while the log has no listening line
// yet.
var ErrNotListening = errors.New("not listening yet")

// Bound reads the proxy's "keyhole-proxy listening" line from its log:
// the forward-proxy address and the admin address it bound.
func Bound(log string) (listen, admin string, err error) {
	for _, line := range strings.Split(log, "\n") {
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

// BoundAddrs is Bound of the log file logFile.
func BoundAddrs(logFile string) (listen, admin string, err error) {
	data, err := os.ReadFile(logFile)
	if err != nil {
		return "", "", err
	}
	return Bound(string(data))
}
