package proxy

import (
	"net"
	"strings"
	"testing"
	"time"
)

// FuzzMetadataAccessToken: any answer of the metadata server's token
// path reads as a token usable in a header with an expiry within a day,
// or as an error that quotes none of it.
func FuzzMetadataAccessToken(f *testing.F) {
	f.Add([]byte(`{"access_token":"ya29.c","expires_in":3599,"token_type":"Bearer"}`))
	f.Add([]byte(`{"access_token":"a b","expires_in":-1}`))
	f.Add([]byte(`{"access_token":"x","expires_in":1e30,"token_type":"mac"}`))
	f.Add([]byte(`[]`))
	now := time.Unix(1_800_000_000, 0)
	f.Fuzz(func(t *testing.T, b []byte) {
		tok, exp, err := parseMetadataAccessToken(b, now)
		if err != nil {
			if len(b) > 8 && strings.Contains(err.Error(), string(b)) {
				t.Fatalf("the error quotes the answer: %v", err)
			}
			return
		}
		if tok.v == "" || strings.ContainsAny(tok.v, " \t\r\n") || !exp.After(now) || exp.Sub(now) > 24*time.Hour {
			t.Fatalf("token %q expiring %s", tok.v, exp)
		}
	})
}

// FuzzMetadataIDToken: any answer of the metadata server's identity
// path reads as a JWT usable in a header with a positive exp, or as an
// error that quotes none of it.
func FuzzMetadataIDToken(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.eyJleHAiOjE4MDAwMDAwMDB9.c2ln")
	f.Add("a.b.c")
	f.Add("eyJ.eyJleHAiOiIxIn0.x\n")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		tok, exp, err := parseMetadataIDToken(s)
		if err != nil {
			if len(s) > 8 && strings.Contains(err.Error(), s) {
				t.Fatalf("the error quotes the answer: %v", err)
			}
			return
		}
		if tok.v == "" || strings.ContainsAny(tok.v, " \t\r\n") || strings.Count(tok.v, ".") != 2 || exp.Unix() <= 0 {
			t.Fatalf("token %q expiring %s", tok.v, exp)
		}
	})
}

// FuzzContainerEndpoint: a container credentials endpoint is accepted
// only over https, or over http on loopback and the ECS and EKS agents'
// addresses; never with user information.
func FuzzContainerEndpoint(f *testing.F) {
	for _, s := range []string{"http://169.254.170.23/v1/credentials", "http://127.0.0.1:8080/x", "https://creds.example/x",
		"http://169.254.169.254/latest", "http://user@127.0.0.1/", "http://[fd00:ec2::23]/v1", "http://localhost.evil.example/", "file:///etc/passwd"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkContainerEndpoint(s) != nil {
			return
		}
		ls := strings.ToLower(s) // a scheme is read in any letter case
		switch {
		case strings.HasPrefix(ls, "https://"):
		case strings.HasPrefix(ls, "http://"):
			// The host, read apart from net/url: the authority up to
			// the first '/', '?' or '#', its port and brackets cut.
			host := strings.TrimPrefix(ls, "http://")
			if i := strings.IndexAny(host, "/?#"); i >= 0 {
				host = host[:i]
			}
			if h, _, err := net.SplitHostPort(host); err == nil {
				host = h
			}
			host = strings.Trim(host, "[]")
			ip := net.ParseIP(host)
			agent := ip != nil && (ip.Equal(net.ParseIP("169.254.170.2")) || ip.Equal(net.ParseIP("169.254.170.23")) || ip.Equal(net.ParseIP("fd00:ec2::23")))
			if host != "localhost" && !agent && (ip == nil || !ip.IsLoopback()) {
				t.Fatalf("accepted %q (host %q)", s, host)
			}
		default:
			t.Fatalf("accepted %q", s)
		}
		// The authority ends at the first '/', '?' or '#'; an '@' after
		// it (a fragment's, a path's) is no user information.
		rest := strings.SplitN(ls, "://", 2)[1]
		if i := strings.IndexAny(rest, "/?#"); i >= 0 {
			rest = rest[:i]
		}
		if strings.Contains(rest, "@") {
			t.Fatalf("accepted user information in %q", s)
		}
	})
}
