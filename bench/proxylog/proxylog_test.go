package proxylog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestBoundAddrs: the listening line is found among others, only with
// both addresses; before it, the error says so.
func TestBoundAddrs(t *testing.T) {
	tests := map[string]struct {
		log                string
		wantListen, wantAd string
		wantErr            error
	}{
		"listening": {
			log:        `{"msg":"starting"}` + "\nnot json\n" + `{"msg":"keyhole-proxy listening","listen":"127.0.0.1:4001","admin":"127.0.0.1:4002"}` + "\n",
			wantListen: "127.0.0.1:4001", wantAd: "127.0.0.1:4002",
		},
		"no admin address yet": {
			log:     `{"msg":"keyhole-proxy listening","listen":"127.0.0.1:4001"}` + "\n",
			wantErr: ErrNotListening,
		},
		"empty": {wantErr: ErrNotListening},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "proxy.log")
			if err := os.WriteFile(f, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			listen, admin, err := BoundAddrs(f)
			if listen != tc.wantListen || admin != tc.wantAd || !errors.Is(err, tc.wantErr) {
				t.Errorf("BoundAddrs = %q, %q, %v; want %q, %q, %v", listen, admin, err, tc.wantListen, tc.wantAd, tc.wantErr)
			}
		})
	}
	if _, _, err := BoundAddrs(filepath.Join(t.TempDir(), "missing.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing log: %v", err)
	}
}
