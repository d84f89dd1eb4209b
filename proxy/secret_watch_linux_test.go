package proxy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestSecretWatch drives the inotify cache through every way a key can
// change between two lookups, with no pause in between: the lookup right
// after a change must see it.
func TestSecretWatch(t *testing.T) {
	dir := t.TempDir()
	d := NewSecretDir(dir)
	if d.watch == nil {
		t.Fatal("NewSecretDir has no inotify watch on Linux")
	}
	want := func(secret, key, v string) {
		t.Helper()
		for range 3 {
			s, err := d.Lookup(secret, key)
			if v == "" {
				if !errors.Is(err, ErrCredentialUnavailable) {
					t.Fatalf("%s/%s = %q, %v; want unavailable", secret, key, s.Reveal(), err)
				}
				continue
			}
			if err != nil || s.Reveal() != v {
				t.Fatalf("%s/%s = %q, %v; want %q", secret, key, s.Reveal(), err, v)
			}
		}
	}
	t.Run("kubelet rotations", func(t *testing.T) {
		k := newKubeSecret(t, filepath.Join(dir, "gh"))
		for i := range 200 {
			v := fmt.Sprintf("token-%03d", i)
			k.write(map[string]string{"token": v, "other": "x"})
			want("gh", "token", v)
		}
		k.write(map[string]string{"other": "x"})
		want("gh", "token", "")
		k.write(map[string]string{"token": "back"})
		want("gh", "token", "back")
	})
	t.Run("in place", func(t *testing.T) {
		for i := range 200 {
			v := fmt.Sprintf("v%03d", i) // same size every time
			writeKey(t, dir, "plain", "k", v)
			want("plain", "k", v)
		}
		if err := os.Truncate(filepath.Join(dir, "plain", "k"), 0); err != nil {
			t.Fatal(err)
		}
		want("plain", "k", "")
	})
	t.Run("secret directory replaced", func(t *testing.T) {
		writeKey(t, dir, "swap", "k", "first")
		want("swap", "k", "first")
		if err := os.RemoveAll(filepath.Join(dir, "swap")); err != nil {
			t.Fatal(err)
		}
		want("swap", "k", "")
		writeKey(t, dir, "swap", "k", "second")
		want("swap", "k", "second")
		// A new directory renamed over the old one.
		writeKey(t, dir, "swap-new", "k", "third")
		if err := os.RemoveAll(filepath.Join(dir, "swap")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "swap-new"), filepath.Join(dir, "swap")); err != nil {
			t.Fatal(err)
		}
		want("swap", "k", "third")
	})
	t.Run("link out of the directory is never cached", func(t *testing.T) {
		outside := filepath.Join(t.TempDir(), "value")
		if err := os.WriteFile(outside, []byte("out-1"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "ext"), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(dir, "ext", "k")); err != nil {
			t.Fatal(err)
		}
		want("ext", "k", "out-1")
		if d.cached(filepath.Join(dir, "ext", "k")) {
			t.Fatal("a key resolving outside its directory was cached")
		}
		os.WriteFile(outside, []byte("out-2"), 0o600)
		want("ext", "k", "out-2")
	})
	t.Run("concurrent lookups during rotations", func(t *testing.T) {
		k := newKubeSecret(t, filepath.Join(dir, "busy"))
		k.write(map[string]string{"token": "t-000"})
		raceRotations(t, d, k, 100, func(i int, v string) {
			// This goroutine's next lookup comes after the swap.
			if s, err := d.Lookup("busy", "token"); err != nil || s.Reveal() != v {
				t.Fatalf("after rotation %d: %q, %v", i, s.Reveal(), err)
			}
		})
	})
}

// has reports whether path's value is cached, for tests.
func (w *secretWatch) has(path string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.vals[path]
	return ok
}
