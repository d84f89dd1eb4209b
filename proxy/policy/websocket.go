package policy

import (
	"encoding/base64"
	"net/http"
	"net/textproto"
	"strings"
)

// IsWebSocketHandshake reports whether a request is a well-formed
// WebSocket opening handshake (RFC 6455, section 4.1): a GET of HTTP/1.1
// or later without a body, whose Connection names upgrade and whose only
// Upgrade is websocket, with one Sec-WebSocket-Version, 13, and one
// Sec-WebSocket-Key, the base64 of 16 bytes. h is the header as sent,
// before its hop-by-hop headers are stripped. Anything else (an h2c
// upgrade, an Upgrade listing more than websocket, an Upgrade that
// Connection does not name) is not one, and is decided as a plain
// request.
func IsWebSocketHandshake(method string, http11, bodyless bool, h http.Header) bool {
	if method != http.MethodGet || !http11 || !bodyless {
		return false
	}
	upgrade := false
	for _, v := range h.Values("Connection") {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(f), "upgrade") {
				upgrade = true
			}
		}
	}
	if !upgrade {
		return false
	}
	one := func(name string) (string, bool) {
		vv := h.Values(name)
		if len(vv) != 1 {
			return "", false
		}
		return textproto.TrimString(vv[0]), true
	}
	if u, ok := one("Upgrade"); !ok || !strings.EqualFold(u, "websocket") {
		return false
	}
	if v, ok := one("Sec-WebSocket-Version"); !ok || v != "13" {
		return false
	}
	k, ok := one("Sec-WebSocket-Key")
	if !ok {
		return false
	}
	key, err := base64.StdEncoding.Strict().DecodeString(k)
	return err == nil && len(key) == 16
}
