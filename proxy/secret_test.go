package proxy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

const canary = "CANARY-7f3e9b1c-do-not-leak"

func TestSecretRedacts(t *testing.T) {
	s := newSecret(canary)
	var logbuf bytes.Buffer
	slog.New(slog.NewJSONHandler(&logbuf, nil)).Info("x", "secret", s, "group", slog.GroupValue(slog.Any("s", s)))
	js, err := json.Marshal(map[string]any{"s": s, "p": &s})
	if err != nil {
		t.Fatal(err)
	}
	outputs := map[string]string{
		"String":   s.String(),
		"%v":       fmt.Sprintf("%v", s),
		"%+v":      fmt.Sprintf("%+v", struct{ S Secret }{s}),
		"%#v":      fmt.Sprintf("%#v", s),
		"%s":       fmt.Sprintf("%s", s),
		"%q":       fmt.Sprintf("%q", s),
		"%x":       fmt.Sprintf("%x", s),
		"pointer":  fmt.Sprintf("%v", &s),
		"error":    fmt.Errorf("wrapped %v", s).Error(),
		"json":     string(js),
		"slog":     logbuf.String(),
		"textjson": mustText(t, s),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(out, canary) || !strings.Contains(out, redacted) {
				t.Fatalf("%s printed %q", name, out)
			}
		})
	}
	if s.Reveal() != canary {
		t.Fatal("Reveal lost the value")
	}
}

func mustText(t *testing.T, s Secret) string {
	b, err := s.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeKey(t testing.TB, dir, secret, key, value string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, secret), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, secret, key), []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestSecretDirLookup(t *testing.T) {
	dir := t.TempDir()
	for key, value := range map[string]string{
		"plain": "tok", "newline": "tok\n", "two newlines": "tok\n\n", "crlf": "tok\r\n",
		"inner newline": "a\nb", "nul": "a\x00b", "empty": "", "only newline": "\n", "cr": "a\rb",
	} {
		writeKey(t, dir, "s", strings.ReplaceAll(key, " ", "-"), value)
	}
	tests := map[string]struct {
		secret, key string
		want        string // "" means unavailable
	}{
		"plain":          {secret: "s", key: "plain", want: "tok"},
		"one newline":    {secret: "s", key: "newline", want: "tok"},
		"two newlines":   {secret: "s", key: "two-newlines"},
		"crlf":           {secret: "s", key: "crlf"},
		"inner newline":  {secret: "s", key: "inner-newline"},
		"nul":            {secret: "s", key: "nul"},
		"cr":             {secret: "s", key: "cr"},
		"empty":          {secret: "s", key: "empty"},
		"only newline":   {secret: "s", key: "only-newline"},
		"missing key":    {secret: "s", key: "nope"},
		"missing secret": {secret: "nope", key: "plain"},
		"traversal key":  {secret: "s", key: "../s/plain"},
		"traversal name": {secret: "..", key: "plain"},
	}
	// The cached directory remembers the names that passed its checks:
	// each name is looked up twice, so the second finds them kept.
	for dname, d := range map[string]SecretDir{"no cache": {Dir: dir}, "cached": NewSecretDir(dir)} {
		for _, pass := range []string{"first", "again"} {
			for name, tc := range tests {
				t.Run(dname+"/"+pass+"/"+name, func(t *testing.T) {
					s, err := d.Lookup(tc.secret, tc.key)
					if tc.want == "" {
						if !errors.Is(err, ErrCredentialUnavailable) {
							t.Fatalf("Lookup = %v, want ErrCredentialUnavailable", err)
						}
						return
					}
					if err != nil || s.Reveal() != tc.want {
						t.Fatalf("Lookup = %q, %v; want %q", s.Reveal(), err, tc.want)
					}
				})
			}
		}
	}
}

// TestSecretDirRotation swaps the ..data symlink as the kubelet does and
// checks that each read sees the current state: rotated, removed, restored.
func TestSecretDirRotation(t *testing.T) {
	dir := t.TempDir()
	sec := filepath.Join(dir, "gh")
	k8s := newKubeSecret(t, sec)
	k8s.write(map[string]string{"token": "one"})
	d := SecretDir{Dir: dir}
	steps := []struct {
		name string
		data map[string]string
		want string
	}{
		{name: "initial", data: nil, want: "one"},
		{name: "rotated", data: map[string]string{"token": "two"}, want: "two"},
		{name: "removed", data: map[string]string{"other": "x"}, want: ""},
		{name: "restored", data: map[string]string{"token": "three"}, want: "three"},
	}
	for _, st := range steps {
		if st.data != nil {
			k8s.write(st.data)
		}
		s, err := d.Lookup("gh", "token")
		if st.want == "" {
			if !errors.Is(err, ErrCredentialUnavailable) {
				t.Fatalf("%s: Lookup = %v, want unavailable", st.name, err)
			}
			continue
		}
		if err != nil || s.Reveal() != st.want {
			t.Fatalf("%s: Lookup = %q, %v; want %q", st.name, s.Reveal(), err, st.want)
		}
	}
}

// kubeSecret mimics the kubelet's atomic writer: keys are symlinks to
// ..data/<key>, ..data is a symlink to a timestamped directory, and an
// update writes a new directory and renames a new ..data over the old one.
type kubeSecret struct {
	t   testing.TB
	dir string
	gen int
}

func newKubeSecret(t testing.TB, dir string) *kubeSecret {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return &kubeSecret{t: t, dir: dir}
}

func (k *kubeSecret) write(data map[string]string) {
	t := k.t
	k.gen++
	ts := fmt.Sprintf("..2026_11_29_00_00_%02d.%d", k.gen, k.gen)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o700); err != nil {
		t.Fatal(err)
	}
	for key, v := range data {
		if err := os.WriteFile(filepath.Join(k.dir, ts, key), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(k.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(k.dir)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "..") {
			if name != "..data" && name != ts {
				os.RemoveAll(filepath.Join(k.dir, name))
			}
			continue
		}
		if _, ok := data[name]; !ok {
			os.Remove(filepath.Join(k.dir, name))
		}
	}
	for key := range data {
		link := filepath.Join(k.dir, key)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", key), link); err != nil {
			t.Fatal(err)
		}
	}
}

func injectHost(t testing.TB, in config.Inject) *policy.HostPolicy {
	t.Helper()
	cfg := &config.Config{APIVersion: config.APIVersion, Kind: config.Kind, Sandbox: config.SandboxRef{Name: "s"},
		Hosts: []config.Host{{Name: "api.example.com", Connection: "c", Inject: in}}}
	p, err := policy.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p.Host("api.example.com")
}

func TestInject(t *testing.T) {
	const ph = "omnia-injected-c"
	values := map[string]string{"token": canary, "user": "x-access-token"}
	lookup := func(secret, key string) (Secret, error) {
		if v, ok := values[key]; ok && secret == "sec" {
			return newSecret(v), nil
		}
		return Secret{}, fmt.Errorf("%w: key %q missing", ErrCredentialUnavailable, key)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	bearer := config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}}
	basic := config.Inject{Secret: "sec", Basic: &config.BasicInject{UsernameKey: "user", PasswordKey: "token"}}
	subst := config.Inject{Secret: "sec", Substitute: &config.SubstituteInject{Placeholder: ph, Key: "token"}}
	tests := map[string]struct {
		in      config.Inject
		header  http.Header
		want    http.Header
		wantErr bool
	}{
		"set replaces": {in: bearer,
			header: http.Header{"Authorization": {"Bearer " + ph, "Basic Zm9v"}, "authorization": {"x"}, "AUTHORIZATION": {"y"}, "Accept": {"a"}},
			want:   http.Header{"Authorization": {"Bearer " + canary}, "Accept": {"a"}}},
		"set when absent": {in: bearer, header: http.Header{}, want: http.Header{"Authorization": {"Bearer " + canary}}},
		"set other header": {in: config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "X-Api-Key", Value: "{{ .token }}"}},
			header: http.Header{"x-api-key": {"ph"}}, want: http.Header{"X-Api-Key": {canary}}},
		// CGI-style servers (and Puma before 6.4.3, CVE-2024-45614) read
		// X_Api_Key as X-Api-Key: left in, the sandbox's value could win
		// over the credential.
		"set replaces the underscore spelling": {in: config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "X-Api-Key", Value: "{{ .token }}"}},
			header: http.Header{"X_api_key": {"mine"}, "X-API_KEY": {"mine"}, "X-Api-Keys": {"k"}, "Xapi-Key": {"k"}}, want: http.Header{"X-Api-Key": {canary}, "X-Api-Keys": {"k"}, "Xapi-Key": {"k"}}},
		"set missing key": {in: config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "Authorization", Value: "{{ .nope }}"}},
			header: http.Header{}, wantErr: true},
		"basic": {in: basic, header: http.Header{"Authorization": {"Bearer " + ph}},
			want: http.Header{"Authorization": {"Basic " + b64("x-access-token:"+canary)}}},
		"basic missing key": {in: config.Inject{Secret: "sec", Basic: &config.BasicInject{UsernameKey: "nope", PasswordKey: "token"}}, header: http.Header{}, wantErr: true},
		"substitute bearer": {in: subst, header: http.Header{"Authorization": {"Bearer " + ph}, "Accept": {"x"}},
			want: http.Header{"Authorization": {"Bearer " + canary}, "Accept": {"x"}}},
		"substitute in basic": {in: subst, header: http.Header{"Authorization": {"Basic " + b64("x-access-token:"+ph)}},
			want: http.Header{"Authorization": {"Basic " + b64("x-access-token:"+canary)}}},
		"substitute basic lower scheme": {in: subst, header: http.Header{"Authorization": {"basic " + b64("x-access-token:"+ph)}},
			want: http.Header{"Authorization": {"Basic " + b64("x-access-token:"+canary)}}},
		"substitute every copy in Authorization": {in: subst, header: http.Header{"Authorization": {"a " + ph + " b " + ph}},
			want: http.Header{"Authorization": {"a " + canary + " b " + canary}}},
		"substitute leaves other headers": {in: subst,
			header: http.Header{"X-Request-Id": {ph}, "Origin": {"https://" + ph}, "X-Token": {ph}, "Cookie": {"t=" + ph}, "Authorization": {"Bearer " + ph}},
			want:   http.Header{"X-Request-Id": {ph}, "Origin": {"https://" + ph}, "X-Token": {ph}, "Cookie": {"t=" + ph}, "Authorization": {"Bearer " + canary}}},
		"substitute named headers": {in: config.Inject{Secret: "sec", Substitute: &config.SubstituteInject{Placeholder: ph, Key: "token", Headers: []string{"PRIVATE-TOKEN", "Authorization"}}},
			header: http.Header{"Private-Token": {ph}, "Authorization": {"Basic " + b64("oauth2:"+ph)}, "X-Request-Id": {ph}},
			want:   http.Header{"Private-Token": {canary}, "Authorization": {"Basic " + b64("oauth2:"+canary)}, "X-Request-Id": {ph}}},
		"substitute named header only": {in: config.Inject{Secret: "sec", Substitute: &config.SubstituteInject{Placeholder: ph, Key: "token", Headers: []string{"x-api-key"}}},
			header: http.Header{"X-Api-Key": {ph}, "Authorization": {"Bearer " + ph}},
			want:   http.Header{"X-Api-Key": {canary}, "Authorization": {"Bearer " + ph}}},
		"substitute absent untouched": {in: subst, header: http.Header{"Authorization": {"Bearer other"}},
			want: http.Header{"Authorization": {"Bearer other"}}},
		"substitute basic without placeholder": {in: subst, header: http.Header{"Authorization": {"Basic " + b64("u:p")}},
			want: http.Header{"Authorization": {"Basic " + b64("u:p")}}},
		"substitute missing value": {in: config.Inject{Secret: "sec", Substitute: &config.SubstituteInject{Placeholder: ph, Key: "nope"}},
			header: http.Header{"Authorization": {"Bearer " + ph}}, wantErr: true},
		"substitute missing but unused": {in: config.Inject{Secret: "sec", Substitute: &config.SubstituteInject{Placeholder: ph, Key: "nope"}},
			header: http.Header{"Accept": {"x"}}, want: http.Header{"Accept": {"x"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := injectHost(t, tc.in)
			inj, err := Inject(h, tc.header, lookup)
			if tc.wantErr {
				if !errors.Is(err, ErrCredentialUnavailable) {
					t.Fatalf("Inject = %v, want ErrCredentialUnavailable", err)
				}
				if strings.Contains(err.Error(), canary) {
					t.Fatal("error holds the secret")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(tc.header) != fmt.Sprint(tc.want) {
				t.Fatalf("header = %v\nwant     %v", tc.header, tc.want)
			}
			// Whatever went out is what the response is scrubbed of:
			// echoed back, no value of it survives.
			echo := tc.header.Clone()
			inj.ScrubHeader(echo)
			for k, vs := range echo {
				for _, v := range vs {
					if strings.Contains(v, canary) || strings.Contains(v, b64("x-access-token:"+canary)) {
						t.Errorf("the echoed %s still holds the credential", k)
					}
				}
			}
			if got := fmt.Sprintf("%v %+v %#v %s", inj, inj, inj, inj); strings.Contains(got, canary) {
				t.Errorf("Injected prints the credential")
			}
		})
	}
}

func BenchmarkSecretDirLookup(b *testing.B) {
	dir := b.TempDir()
	k := newKubeSecret(b, filepath.Join(dir, "gh"))
	k.write(map[string]string{"token": canary})
	d := SecretDir{Dir: dir}
	for b.Loop() {
		if _, err := d.Lookup("gh", "token"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInjectBearer(b *testing.B) {
	dir := b.TempDir()
	writeKey(b, dir, "sec", "token", canary)
	h := injectHost(b, config.Inject{Secret: "sec", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}})
	d := SecretDir{Dir: dir}
	for b.Loop() {
		hdr := http.Header{"Authorization": {"Bearer omnia-injected-c"}, "Accept": {"*/*"}, "User-Agent": {"curl"}}
		if _, err := Inject(h, hdr, d.Lookup); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzInject(f *testing.F) {
	const ph = "omnia-injected-c"
	b64 := base64.StdEncoding.EncodeToString
	f.Add("Authorization", "Basic "+b64([]byte("x-access-token:"+ph)), uint8(2))
	f.Add("Authorization", "Bearer "+ph, uint8(2))
	f.Add("authorization", "token "+ph+" "+ph, uint8(2))
	f.Add("X-Request-Id", ph, uint8(2))
	f.Add("authorization", "x", uint8(0))
	f.Add("X-Other", ph+ph, uint8(1))
	forms := []config.Inject{
		{Secret: "sec", Header: &config.HeaderInject{Name: "Authorization", Value: "Bearer {{ .token }}"}},
		{Secret: "sec", Basic: &config.BasicInject{UsernameKey: "user", PasswordKey: "token"}},
		{Secret: "sec", Substitute: &config.SubstituteInject{Placeholder: ph, Key: "token"}},
	}
	hosts := make([]*policy.HostPolicy, len(forms))
	for i, in := range forms {
		hosts[i] = injectHost(f, in)
	}
	lookup := func(_, key string) (Secret, error) { return newSecret(canary + key), nil }
	real := canary + "token"
	f.Fuzz(func(t *testing.T, name, value string, form uint8) {
		h := hosts[int(form)%len(hosts)]
		hdr := http.Header{name: {value}}
		inj, err := Inject(h, hdr, lookup)
		if err != nil {
			t.Fatalf("Inject: %v", err)
		}
		// Whatever went out, an upstream echoing every header back
		// hands the sandbox no credential.
		echo := hdr.Clone()
		inj.ScrubHeader(echo)
		for k, vs := range echo {
			for _, v := range vs {
				if strings.Contains(v, real) && !strings.Contains(value, real) {
					t.Fatalf("the echoed %s holds the credential after scrubbing", k)
				}
			}
		}
		if h.Inject.Substitute == nil {
			want := "Bearer " + real
			if h.Inject.Basic != nil {
				want = "Basic " + b64([]byte(canary+"user:"+real))
			}
			n := 0
			for k, vs := range hdr {
				if strings.EqualFold(k, "Authorization") {
					n++
					if len(vs) != 1 || vs[0] != want {
						t.Fatalf("set form left %s: %q", k, vs)
					}
				}
			}
			if n != 1 {
				t.Fatalf("set form left %d Authorization keys: %v", n, hdr)
			}
			return
		}
		got := hdr[name]
		if len(hdr) != 1 || len(got) != 1 {
			t.Fatalf("substitution added or removed headers: %v", hdr)
		}
		if !strings.EqualFold(name, "Authorization") {
			// Only the headers the injection names are touched.
			if got[0] != value {
				t.Fatalf("substitution changed %s, which it does not name", name)
			}
			return
		}
		// Authorization: the placeholder is replaced, in the clear or
		// inside the base64 of Basic, and nothing else changes.
		scheme, cred, _ := strings.Cut(strings.TrimSpace(value), " ")
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred)); strings.EqualFold(scheme, "Basic") && err == nil && strings.Contains(string(raw), ph) {
			want := "Basic " + b64([]byte(strings.ReplaceAll(string(raw), ph, real)))
			if got[0] != want {
				t.Fatalf("Basic credentials holding the placeholder were not substituted")
			}
			return
		}
		if want := strings.ReplaceAll(value, ph, real); got[0] != want {
			t.Fatalf("Authorization %q: the placeholder was not replaced by the credential", value)
		}
		if strings.Contains(value, ph) && strings.Contains(got[0], ph) {
			t.Fatalf("Authorization still holds the placeholder after substitution")
		}
	})
}

// TestSecretDirCache checks that neither cache ever serves a value the
// file no longer holds: not after a ..data swap, not after a same-size
// rewrite in place (old or fresh file), not after removal.
func TestSecretDirCache(t *testing.T) {
	modes := []struct {
		name string
		new  func(dir string) SecretDir
		// caches a file modified just now: inotify sees any later write,
		// a stat cannot tell two writes within one clock tick apart.
		cachesFresh bool
	}{
		{name: "stat", new: newStatSecretDir},
		{name: "inotify", new: NewSecretDir, cachesFresh: true},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			dir := t.TempDir()
			d := m.new(dir)
			if m.name == "inotify" && d.watch == nil {
				t.Fatal("NewSecretDir has no inotify watch on Linux")
			}
			path := filepath.Join(dir, "s", "k")
			old := time.Now().Add(-time.Hour)
			expect := func(step, want string) {
				t.Helper()
				for range 2 { // the second call may be served from the cache
					s, err := d.Lookup("s", "k")
					if want == "" {
						if !errors.Is(err, ErrCredentialUnavailable) {
							t.Fatalf("%s: Lookup = %q, %v; want unavailable", step, s.Reveal(), err)
						}
						continue
					}
					if err != nil || s.Reveal() != want {
						t.Fatalf("%s: Lookup = %q, %v; want %q", step, s.Reveal(), err, want)
					}
				}
			}
			writeKey(t, dir, "s", "k", "aaaa")
			os.Chtimes(path, old, old)
			expect("stable file", "aaaa")
			if !d.cached(path) {
				t.Fatal("a stable file was not cached")
			}
			// In place, same size: the modification time moves past the cached one.
			if err := os.WriteFile(path, []byte("bbbb"), 0o600); err != nil {
				t.Fatal(err)
			}
			expect("rewritten in place", "bbbb")
			if got := d.cached(path); got != m.cachesFresh {
				t.Fatalf("a fresh file: cached = %v, want %v", got, m.cachesFresh)
			}
			// Fresh and rewritten again within the same clock tick.
			os.WriteFile(path, []byte("cccc"), 0o600)
			expect("rewritten again at once", "cccc")
			os.Remove(path)
			expect("removed", "")
			writeKey(t, dir, "s", "k", "dddd")
			os.Chtimes(path, old, old)
			expect("restored", "dddd")
			// The kubelet's way: a new file through ..data, here with the same
			// size and modification time, so only the inode tells them apart.
			k := newKubeSecret(t, filepath.Join(dir, "kube"))
			k.write(map[string]string{"k": "eeee"})
			target := func() string { p, _ := filepath.EvalSymlinks(filepath.Join(dir, "kube", "k")); return p }
			os.Chtimes(target(), old, old)
			for _, want := range []string{"eeee", "eeee"} {
				if s, err := d.Lookup("kube", "k"); err != nil || s.Reveal() != want {
					t.Fatalf("kube: %q, %v", s.Reveal(), err)
				}
			}
			if !d.cached(filepath.Join(dir, "kube", "k")) {
				t.Fatal("a kubelet-mounted key was not cached")
			}
			k.write(map[string]string{"k": "ffff"})
			os.Chtimes(target(), old, old)
			if s, err := d.Lookup("kube", "k"); err != nil || s.Reveal() != "ffff" {
				t.Fatalf("after a ..data swap: %q, %v", s.Reveal(), err)
			}
		})
	}
}

// BenchmarkSecretDirLookupCached compares the two caches on a kubelet
// layout: inotify (one EAGAIN read) against stat (a path walk through
// two symbolic links).
func BenchmarkSecretDirLookupCached(b *testing.B) {
	for _, m := range []struct {
		name string
		new  func(string) SecretDir
	}{{"inotify", NewSecretDir}, {"stat", newStatSecretDir}} {
		b.Run(m.name, func(b *testing.B) {
			dir := b.TempDir()
			k := newKubeSecret(b, filepath.Join(dir, "gh"))
			k.write(map[string]string{"token": canary})
			p, _ := filepath.EvalSymlinks(filepath.Join(dir, "gh", "token"))
			old := time.Now().Add(-time.Hour)
			os.Chtimes(p, old, old)
			d := m.new(dir)
			for b.Loop() {
				if _, err := d.Lookup("gh", "token"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSecretRotationConcurrent: lookups that race the kubelet's rotations
// never find the key absent, whichever cache serves them. The kubelet
// removes the old timestamped directory right after swapping ..data, so a
// lookup that resolved ..data just before finds it gone; Lookup reads the
// key again rather than refusing the request.
func TestSecretRotationConcurrent(t *testing.T) {
	for name, d := range map[string]func(string) SecretDir{
		"no cache":   func(dir string) SecretDir { return SecretDir{Dir: dir} },
		"stat cache": newStatSecretDir,
		"default":    NewSecretDir,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			sd := d(dir)
			k := newKubeSecret(t, filepath.Join(dir, "busy"))
			k.write(map[string]string{"token": "t-000"})
			raceRotations(t, sd, k, 200, nil)
		})
	}
}

// raceRotations rotates k's token n times (t-001 on) while 4 goroutines
// look it up through d, and fails if one of them ever finds it absent or
// not one of k's values. after, when set, runs after each rotation, on
// the test's goroutine.
func raceRotations(t *testing.T, d SecretDir, k *kubeSecret, n int, after func(i int, v string)) {
	t.Helper()
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if s, err := d.Lookup("busy", "token"); err != nil || !strings.HasPrefix(s.Reveal(), "t-") {
					errs <- fmt.Errorf("lookup during rotation: %q, %v", s.Reveal(), err)
					return
				}
			}
		}()
	}
	defer func() {
		for range 4 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	}()
	defer close(stop)
	for i := 1; i <= n; i++ {
		v := fmt.Sprintf("t-%03d", i)
		k.write(map[string]string{"token": v})
		if after != nil {
			after(i, v)
		}
	}
}
