package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/config"
)

// answerTransport answers every request with one fixed response.
type answerTransport struct {
	status      int
	contentType string
	body        []byte
}

func (a answerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: a.status, Header: http.Header{"Content-Type": {a.contentType}},
		Body: io.NopCloser(bytes.NewReader(a.body)), Request: r}, nil
}

// FuzzTokenResponse feeds token endpoints' answers (status, content
// type, body) to the exchange: it never panics, a token it accepts is
// usable in a header, and its error never quotes the answer.
func FuzzTokenResponse(f *testing.F) {
	f.Add(200, "application/json", []byte(`{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-2"}`))
	f.Add(200, "application/x-www-form-urlencoded", []byte(`access_token=at-1&token_type=bearer&expires_in=60`))
	f.Add(400, "application/json", []byte(`{"error":"invalid_grant","error_description":"CANARY"}`))
	f.Add(200, "application/json", []byte(`{"access_token":"a\r\nb","token_type":"mac"}`))
	f.Add(200, "text/plain", []byte("access_token=%00"))
	f.Fuzz(func(t *testing.T, status int, contentType string, body []byte) {
		if status < 100 || status > 999 {
			return
		}
		m := newOAuthMinter(&http.Client{Transport: answerTransport{status: status, contentType: contentType, body: body}}, func(string, string) {}, &refreshStore{tokens: map[string]refreshRecord{}}, func(string, ...any) {})
		lookup := func(_, key string) (Secret, error) { return Secret{v: "value-of-" + key}, nil }
		o := &config.OAuth2Inject{TokenURL: "https://auth.example/token", Grant: config.OAuth2GrantRefreshToken, ClientIDKey: "id", RefreshTokenKey: "rt"}
		tok, _, err := m.exchangeOAuth2(context.Background(), "s", o, lookup)
		if err != nil {
			if len(body) >= 8 && strings.Contains(err.Error(), string(body)) {
				t.Fatalf("the error quotes the answer: %v", err)
			}
			return
		}
		if v, err := config.HeaderValue([]byte(tok.v)); err != nil || string(v) != tok.v || tok.v == "" {
			t.Fatalf("accepted a token unusable in a header: %q", tok.v)
		}
	})
}

// FuzzServiceAccountKey feeds JSON keys to the parser: it never panics,
// a key it accepts has an address and a private key, and its error never
// quotes the key.
func FuzzServiceAccountKey(f *testing.F) {
	k, err := appKey()
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(serviceAccountJSON(f, k, "https://oauth2.googleapis.com/token")))
	f.Add([]byte(`{"type":"service_account","client_email":"a@b.c","private_key":"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"}`))
	f.Add([]byte(`{"type":"authorized_user"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		key, err := parseServiceAccountKey(b)
		if err != nil {
			if len(b) >= 8 && strings.Contains(err.Error(), string(b)) {
				t.Fatalf("the error quotes the key: %v", err)
			}
			return
		}
		if key.email == "" || key.pem.v == "" {
			t.Fatalf("accepted a key without an address or a private key")
		}
		if _, err := parseAppKey([]byte(key.pem.v)); err != nil {
			t.Fatalf("accepted a private key that does not parse: %v", err)
		}
	})
}

// FuzzRefreshState feeds state files to their reader: it never panics,
// and what it keeps has a fingerprint and a token.
func FuzzRefreshState(f *testing.F) {
	f.Add([]byte(`{"refreshTokens":{"s/rt https://auth.example/token":{"seed":"` + strings.Repeat("a", 64) + `","refreshToken":"rt-1"}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"refreshTokens":{"k":{"seed":"x"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseRefreshState(b)
		if err != nil {
			return
		}
		for k, rec := range got {
			if len(rec.Seed) != 64 || rec.Token == "" {
				t.Fatalf("kept %q: %+v", k, rec)
			}
		}
	})
}

// TestTokenCacheWaitIsBounded holds a request no longer than flightWait
// on an exchange that does not end, and the next request shares it.
func TestTokenCacheWaitIsBounded(t *testing.T) {
	c := newTokenCache()
	c.flightWait = 50 * time.Millisecond
	release := make(chan struct{})
	var calls atomic.Int32
	ex := func(ctx context.Context) (Secret, time.Time, error) {
		calls.Add(1)
		<-release
		return Secret{v: "tok"}, time.Now().Add(time.Hour), nil
	}
	start := time.Now()
	if _, _, err := c.get("k", nil, ex); err != errFlightWait {
		t.Fatalf("err %v, want errFlightWait", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("waited %s", d)
	}
	if _, _, err := c.get("k", nil, ex); err != errFlightWait {
		t.Fatalf("err %v, want errFlightWait", err)
	}
	close(release)
	c.flightWait = 5 * time.Second
	tok, _, err := c.get("k", nil, ex)
	if err != nil || tok.v != "tok" || calls.Load() != 1 {
		t.Fatalf("got %v, %v after %d exchanges, want the one exchange's token", tok.v, err, calls.Load())
	}
}

// TestTokenCacheStaleRenewal replaces a token an upstream refused once,
// shares the replacement with the requests refused with the same token,
// and starts no second replacement within staleGap: an upstream that
// refuses every token does not make each request an exchange.
func TestTokenCacheStaleRenewal(t *testing.T) {
	c := newTokenCache()
	var calls atomic.Int32
	ex := func(context.Context) (Secret, time.Time, error) {
		n := calls.Add(1)
		return Secret{v: fmt.Sprintf("tok-%d", n)}, time.Now().Add(time.Hour), nil
	}
	first, _, err := c.get("k", nil, ex)
	if err != nil {
		t.Fatal(err)
	}
	second, fresh, err := c.get("k", &first, ex)
	if err != nil || !fresh || second.v != "tok-2" {
		t.Fatalf("after a refusal: %q, %v, %v; want a fresh tok-2", second.v, fresh, err)
	}
	again, fresh, err := c.get("k", &first, ex)
	if err != nil || fresh || again.v != "tok-2" {
		t.Fatalf("a request refused with the old token: %q, %v, %v; want tok-2 as held", again.v, fresh, err)
	}
	if _, _, err := c.get("k", &second, ex); !errors.Is(err, errRenewedRecently) {
		t.Fatalf("a second refusal within staleGap: %v, want errRenewedRecently", err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d exchanges, want 2", n)
	}
}
