package proxy

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
)

// ErrCredentialUnavailable is wrapped when a Secret key the injection
// needs is missing, empty or not a single line. The server answers it with
// credential-unavailable (502). Its messages name the Secret and key,
// never the value.
var ErrCredentialUnavailable = errors.New("credential unavailable")

// redacted is the only form of a secret value that is ever printed.
const redacted = "[REDACTED]"

// Secret holds one credential value. Every way of printing it — String,
// GoString, Format, LogValue, MarshalJSON, MarshalText — prints a redacted
// form, so a value that strays into a log line, an error or a response
// body leaks nothing. Only Reveal returns the value, and only injection
// calls it.
type Secret struct{ v string }

// Reveal returns the value, for writing into an outbound header.
func (s Secret) Reveal() string { return s.v }

// String returns the redacted form.
func (s Secret) String() string { return redacted }

// GoString returns the redacted form, for %#v.
func (s Secret) GoString() string { return redacted }

// Format prints the redacted form for every verb.
func (s Secret) Format(f fmt.State, _ rune) { io.WriteString(f, redacted) }

// LogValue logs the redacted form.
func (s Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalJSON encodes the redacted form.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(`"` + redacted + `"`), nil }

// MarshalText encodes the redacted form.
func (s Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }

// SecretLookup returns the value of one key of one Secret.
type SecretLookup func(secret, key string) (Secret, error)

// maxSecretSize bounds a key file: credentials are small, and a huge file
// is a mistake that must not cost memory on every request.
const maxSecretSize = 64 << 10

// SecretDir reads Secret values from a Kubernetes Secret volume layout,
// Dir/<secret>/<key>, where each key is a symlink through ..data that the
// kubelet swaps atomically on rotation. The zero value (SecretDir{Dir: d})
// reads the file on every call. NewSecretDir adds a cache: on Linux it is
// kept valid by inotify and costs one non-blocking read of the inotify
// descriptor per call; elsewhere, or when inotify is unavailable, it costs
// one stat per call (BenchmarkSecretDirLookup* give the figures). Either
// way a rotated value is used, and a removed key fails, on the very next
// request.
type SecretDir struct {
	Dir   string
	cache *secretCache
	watch *secretWatch
	paths *checkedPaths
}

// checkedPaths keeps the file path of each secret and key name pair
// that passed Lookup's name checks: the checks are regular expressions,
// a pure function of the names, and the same few names come with every
// request. Only pairs that passed are kept, at most maxCheckedPaths of
// them (the config names a few); past that, names are checked each time.
type checkedPaths struct {
	m sync.Map // [2]string{secret, key} → path
	n atomic.Int32
}

const maxCheckedPaths = 1024

// path returns dir/secret/key, or false when a name is not one
// Kubernetes allows.
func (c *checkedPaths) path(dir, secret, key string) (string, bool) {
	if c != nil {
		if p, ok := c.m.Load([2]string{secret, key}); ok {
			return p.(string), true
		}
	}
	if config.CheckSecretName(secret) != nil || config.CheckSecretKey(key) != nil {
		return "", false
	}
	p := filepath.Join(dir, secret, key)
	if c != nil && c.n.Load() < maxCheckedPaths {
		if _, loaded := c.m.LoadOrStore([2]string{secret, key}, p); !loaded {
			c.n.Add(1)
		}
	}
	return p, true
}

// NewSecretDir returns a SecretDir with a cache: inotify-backed where the
// platform allows it, keyed by file identity otherwise.
func NewSecretDir(dir string) SecretDir {
	d := newStatSecretDir(dir)
	d.watch = newSecretWatch()
	return d
}

// newStatSecretDir returns a SecretDir whose cache is checked with a stat
// per lookup, the portable fallback.
func newStatSecretDir(dir string) SecretDir {
	return SecretDir{Dir: dir, cache: &secretCache{m: map[string]cachedSecret{}}, paths: &checkedPaths{}}
}

// secretCache maps a key file's path to the value read from it and the
// file's identity (device and inode, size, modification time) at the time.
type secretCache struct {
	mu sync.Mutex
	m  map[string]cachedSecret
}

type cachedSecret struct {
	fi  os.FileInfo
	val Secret
}

// stableAfter is how old a file's modification time must be before its
// value is cached. File times are coarse (a kernel tick), so a file
// rewritten in place twice within one tick could keep its time and size;
// caching only files that have been still for longer than that — as git
// does with "racily clean" index entries — means any later write moves the
// time past the cached one. The kubelet never writes in place: each
// rotation is a new file, hence a new inode, which is caught at once.
const stableAfter = 2 * time.Second

// Lookup reads secret/key. The value is the file's content with one
// trailing "\n" trimmed; it must then be what config.HeaderValue takes
// (non-empty, no CR, LF, NUL or other control character but tab), or the
// error wraps ErrCredentialUnavailable.
//
// A key the kubelet is rotating is read again when it looks absent: the
// kubelet swaps ..data to the new timestamped directory and then removes
// the old one, so a lookup that resolved ..data just before the swap can
// find the old directory gone (ENOENT) although the key is there. The
// next resolution follows the new ..data.
func (d SecretDir) Lookup(secret, key string) (Secret, error) {
	path, ok := d.paths.path(d.Dir, secret, key)
	if !ok {
		return Secret{}, fmt.Errorf("%w: invalid secret or key name", ErrCredentialUnavailable)
	}
	var v Secret
	var err error
	for range lookupAttempts {
		if v, err = d.lookup(path, secret, key); !errors.As(err, new(*notMountedError)) {
			break
		}
	}
	return v, err
}

// lookupAttempts is how many times Lookup reads a key that looks absent:
// a lookup that loses the race with a swap once is unlucky, and three
// times in a row it would have to lose it to three rotations.
const lookupAttempts = 3

// notMountedError says a key's file is not there; it wraps
// ErrCredentialUnavailable.
type notMountedError struct{ secret, key string }

func (e *notMountedError) Error() string {
	return fmt.Sprintf("%v: key %q of secret %q is not mounted", ErrCredentialUnavailable, e.key, e.secret)
}

func (e *notMountedError) Unwrap() error { return ErrCredentialUnavailable }

// notMounted is the error of a key whose file is not there.
func notMounted(secret, key string) error { return &notMountedError{secret: secret, key: key} }

// lookup is one reading of path, from the inotify cache, else the stat
// cache, else the file.
func (d SecretDir) lookup(path, secret, key string) (Secret, error) {
	if d.watch != nil {
		if v, err, ok := d.watch.lookup(path, secret, key); ok {
			return v, err
		}
	}
	if d.cache == nil {
		return readSecret(path, secret, key)
	}
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		d.cache.drop(path)
		return Secret{}, notMounted(secret, key)
	}
	if c, ok := d.cache.get(path); ok && os.SameFile(c.fi, fi) && c.fi.Size() == fi.Size() && c.fi.ModTime().Equal(fi.ModTime()) {
		return c.val, nil
	}
	v, err := readSecret(path, secret, key)
	if err != nil {
		d.cache.drop(path)
		return Secret{}, err
	}
	// fi was taken before the read: if the file changed in between, the
	// next stat differs from fi and the value is read again.
	if time.Since(fi.ModTime()) > stableAfter {
		d.cache.put(path, cachedSecret{fi: fi, val: v})
	} else {
		d.cache.drop(path)
	}
	return v, nil
}

func (c *secretCache) get(path string) (cachedSecret, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[path]
	return v, ok
}

func (c *secretCache) put(path string, v cachedSecret) {
	c.mu.Lock()
	c.m[path] = v
	c.mu.Unlock()
}

func (c *secretCache) drop(path string) {
	c.mu.Lock()
	delete(c.m, path)
	c.mu.Unlock()
}

func readSecret(path, secret, key string) (Secret, error) {
	f, err := os.Open(path)
	if err != nil {
		return Secret{}, notMounted(secret, key)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretSize+1))
	if err != nil {
		return Secret{}, fmt.Errorf("%w: key %q of secret %q cannot be read", ErrCredentialUnavailable, key, secret)
	}
	if len(b) > maxSecretSize {
		return Secret{}, fmt.Errorf("%w: key %q of secret %q is larger than %d bytes", ErrCredentialUnavailable, key, secret, maxSecretSize)
	}
	// The same rule as keyhole check's, so that a value check passed is
	// one the proxy uses, and a Secret changed after the check that the
	// rule refuses is unavailable rather than sent by one forwarding path
	// and refused by the other.
	v, err := config.HeaderValue(b)
	if err != nil {
		return Secret{}, fmt.Errorf("%w: key %q of secret %q: %w", ErrCredentialUnavailable, key, secret, err)
	}
	return Secret{v: string(v)}, nil
}

// Inject sets h's credential on an outbound request's header, reading the
// values through lookup, and returns what it injected, for the response
// to be scrubbed of. It must run after hop-by-hop headers are stripped,
// so that no Connection header can remove what it sets.
//
//   - Header form: every copy of the header, in any casing, is replaced by
//     the rendered template.
//   - Basic form: Authorization is replaced by Basic base64(user:pass).
//   - Substitute form: the placeholder is replaced by the value in the
//     headers the injection names (Authorization by default), including
//     inside the base64 of Authorization: Basic. Every other header, the
//     URL and the body are never touched, so a placeholder there stays a
//     placeholder: an upstream that echoes a request header such as
//     X-Request-Id or Origin can only echo the placeholder.
//
// Errors wrap ErrCredentialUnavailable and name keys, never values; on
// error the header may be partly stripped and must not be sent.
func Inject(h *policy.HostPolicy, header http.Header, lookup SecretLookup) (Injected, error) {
	in := h.Inject
	var inj Injected
	// read reads a key; secret says whether its value is a credential,
	// to be scrubbed from responses in its encoded forms too, or (a
	// basic user name) only as it is.
	read := func(key string, secret bool) (string, error) {
		s, err := lookup(in.Secret, key)
		if err != nil {
			return "", err
		}
		if secret {
			inj.addEncoded(s.v)
		} else {
			inj.add(s.v)
		}
		return s.Reveal(), nil
	}
	switch {
	case in.Header != nil:
		t := h.Template()
		if t == nil {
			var err error
			if t, err = config.ParseTemplate(in.Header.Value); err != nil {
				return Injected{}, fmt.Errorf("%w: %w", ErrCredentialUnavailable, err)
			}
		}
		v, err := t.Render(func(key string) (string, error) { return read(key, true) })
		if err != nil {
			return Injected{}, err
		}
		setHeader(header, in.Header.Name, v)
		inj.add(v)
	case in.Basic != nil:
		user, err := read(in.Basic.UsernameKey, false)
		if err != nil {
			return Injected{}, err
		}
		pass, err := read(in.Basic.PasswordKey, true)
		if err != nil {
			return Injected{}, err
		}
		enc := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
		setHeader(header, "Authorization", "Basic "+enc)
		inj.add(enc)
	case in.Substitute != nil:
		err := substitute(header, in.Substitute, &inj, func() (string, error) { return read(in.Substitute.Key, true) })
		if err != nil {
			return Injected{}, err
		}
	default:
		return Injected{}, fmt.Errorf("%w: host %s has no injection form", ErrCredentialUnavailable, h.Name)
	}
	return inj, nil
}

// setHeader replaces every copy of name, in any casing and with '_'
// for '-', with one value: CGI-style servers read X_Api_Key as X-Api-Key,
// so a copy the sandbox sent so spelt could win over the credential.
func setHeader(header http.Header, name, value string) {
	for k := range header {
		if policy.SameHeaderName(k, name) {
			delete(header, k)
		}
	}
	header.Set(name, value)
}

// substitute replaces the placeholder in the values of the headers sub
// names. The value is read once, and only if one of them holds the
// placeholder.
func substitute(header http.Header, sub *config.SubstituteInject, inj *Injected, value func() (string, error)) error {
	var v string
	var loaded bool
	get := func() (string, error) {
		if !loaded {
			var err error
			if v, err = value(); err != nil {
				return "", err
			}
			loaded = true
		}
		return v, nil
	}
	placeholder, names := sub.Placeholder, sub.HeaderNames()
	for name, values := range header {
		if !containsFold(names, name) {
			continue
		}
		for i, hv := range values {
			if strings.EqualFold(name, "Authorization") {
				if out, enc, ok, err := substituteBasic(hv, placeholder, get); err != nil {
					return err
				} else if ok {
					values[i] = out
					inj.add(enc)
					continue
				}
			}
			if strings.Contains(hv, placeholder) {
				s, err := get()
				if err != nil {
					return err
				}
				values[i] = strings.ReplaceAll(hv, placeholder, s)
			}
		}
	}
	return nil
}

// containsFold reports whether names holds name in any letter case.
func containsFold(names []string, name string) bool {
	for _, n := range names {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// substituteBasic handles "Basic base64(user:pass)" whose decoded form
// holds the placeholder, as git sends x-access-token:<placeholder>. It
// returns the new header value and its base64 part.
func substituteBasic(hv, placeholder string, get func() (string, error)) (string, string, bool, error) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(hv), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return "", "", false, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil || !strings.Contains(string(raw), placeholder) {
		return "", "", false, nil
	}
	s, err := get()
	if err != nil {
		return "", "", false, err
	}
	enc := base64.StdEncoding.EncodeToString([]byte(strings.ReplaceAll(string(raw), placeholder, s)))
	return "Basic " + enc, enc, true, nil
}
