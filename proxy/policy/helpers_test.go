package policy

import (
	"errors"
	"mime"
	"strings"
	"testing"
	"unicode/utf8"

	"keyhole.dev/keyhole/proxy/config"
)

// decideOnce compiles cfg and decides req, for tests that judge a single
// request.
func decideOnce(cfg *config.Config, req RequestInfo) (Decision, error) {
	p, err := NewPolicy(cfg)
	if err != nil {
		return Decision{}, err
	}
	return p.Decide(req), nil
}

// checkVerdict holds a body check's err to a table row: none where ok,
// else a refusal that wraps ErrBody and says why.
func checkVerdict(t *testing.T, err error, ok bool, why string) {
	t.Helper()
	if ok {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if err == nil {
		t.Fatal("allowed")
	}
	if !errors.Is(err, ErrBody) {
		t.Errorf("%v does not wrap ErrBody", err)
	}
	if !strings.Contains(err.Error(), why) {
		t.Errorf("refused with %q, want it to say %q", err, why)
	}
}

// allowedJSONBody reports whether a body check let data, declared as
// contentType, through; a refusal must wrap ErrBody, and what is let
// through must be declared a JSON media type and be valid UTF-8.
func allowedJSONBody(t *testing.T, err error, data []byte, contentType string) bool {
	t.Helper()
	if err != nil {
		if !errors.Is(err, ErrBody) {
			t.Fatalf("error %v does not wrap ErrBody", err)
		}
		return false
	}
	mt, _, perr := mime.ParseMediaType(contentType)
	if perr != nil || !strings.HasPrefix(mt, "application/") || !strings.HasSuffix(mt, "json") {
		t.Fatalf("accepted a body declared as %q", contentType)
	}
	if !utf8.Valid(data) {
		t.Fatalf("accepted invalid UTF-8 %q", data)
	}
	return true
}
