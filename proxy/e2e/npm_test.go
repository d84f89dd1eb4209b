//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNpmScopedPackages: the real npm, through the proxy with a
// read-only Connection (GET and HEAD under "/") to a registry standing in
// for registry.npmjs.org, reads a scoped package: npm view and npm
// install ask for /@acme%2fwidgets, which reaches the registry as sent
// with the credential, and the tarball after it. npm publish, a PUT to
// the same path, is refused (l7-not-allowed) and the registry gets none.
func TestNpmScopedPackages(t *testing.T) {
	npm := requireTool(t, "npm")
	w := newWorld(t, "github-acme.json")
	registry := newNpmRegistry(t, w, "@acme/widgets").up
	w.proxy = w.startProxy(t, filepath.Join("testdata", "npm.json"), "--resolve", "registry.npmjs.org:443:"+registry.addr)

	home := t.TempDir()
	// npm publishes only with a token for the registry: the sandbox's is
	// the placeholder.
	writeFile(t, filepath.Join(home, ".npmrc"), []byte("//registry.npmjs.org/:_authToken=omnia-injected-npm-acme\n"))
	env := w.sandboxEnv(t, "HOME="+home, "NPM_CONFIG_CAFILE="+w.bundle, "NPM_CONFIG_REGISTRY=https://registry.npmjs.org/",
		"NPM_CONFIG_UPDATE_NOTIFIER=false", "NPM_CONFIG_AUDIT=false", "NPM_CONFIG_FUND=false", "NPM_CONFIG_FETCH_RETRIES=0")

	view := w.runClient(t, home, env, npm, "view", "@acme/widgets", "version")
	if view.err != nil || strings.TrimSpace(view.stdout) != "1.0.0" {
		t.Fatalf("npm view @acme/widgets version: %v\n%s%s", view.err, view.stdout, view.stderr)
	}

	project := t.TempDir()
	writeFile(t, filepath.Join(project, "package.json"), []byte(`{"name":"agent-work","version":"0.0.0","private":true}`))
	install := w.runClient(t, project, env, npm, "install", "@acme/widgets")
	if install.err != nil {
		t.Fatalf("npm install @acme/widgets: %v\n%s%s", install.err, install.stdout, install.stderr)
	}
	if _, err := os.Stat(filepath.Join(project, "node_modules", "@acme", "widgets", "package.json")); err != nil {
		t.Fatalf("npm install left no package: %v", err)
	}

	wantPublishRefused(t, w, env, npm)

	var gets, tarballs int
	for _, r := range registry.requests() {
		switch {
		case r.Method == http.MethodPut:
			t.Errorf("the registry got %s %s", r.Method, r.URI)
		case r.URI == "/@acme%2fwidgets" || r.URI == "/@acme%2Fwidgets":
			gets++
		case strings.HasSuffix(r.URI, ".tgz"):
			tarballs++
		}
	}
	if gets < 2 || tarballs != 1 {
		t.Errorf("the registry got %d requests for the scoped package as sent and %d for its tarball: %v", gets, tarballs, registry.requests())
	}
	eventually(t, "the publish's refusal in the proxy's log", func() bool {
		return strings.Contains(w.proxy.stderr.String(), `"method":"PUT","path":"/@acme%2fwidgets","decision":"refuse","reason":"l7-not-allowed"`)
	})
}

// wantPublishRefused has npm publish a version of @acme/widgets, which
// the proxy must refuse with its 403.
func wantPublishRefused(t *testing.T, w *world, env []string, npm string) {
	t.Helper()
	pkg := t.TempDir()
	writeFile(t, filepath.Join(pkg, "package.json"), []byte(`{"name":"@acme/widgets","version":"1.0.1"}`))
	publish := w.runClient(t, pkg, env, npm, "publish", "--access", "restricted")
	if publish.err == nil {
		t.Fatalf("npm publish succeeded:\n%s%s", publish.stdout, publish.stderr)
	}
	if !strings.Contains(publish.stderr, "403") {
		t.Errorf("npm publish failed otherwise than with the proxy's 403:\n%s", publish.stderr)
	}
}

// TestNpmScopeSegment: a Connection restricted to the scope @acme by a
// rule with encodedSlash: segment (GET and HEAD under the prefix /@acme,
// the tarballs, and the pattern /@acme%2F*, each package document of the
// scope as npm asks for it) lets the real npm, yarn classic and pnpm read
// and install @acme/widgets through the proxy, the document reaching the
// registry with its %2f as sent; @other/x, a name spelling the scope
// across the %2F (/@acme%2fwidgets%2fx) and npm publish are refused
// (l7-not-allowed), and the registry gets none of them. yarn and pnpm
// come from scripts/js-clients.sh, which make test-deps runs.
func TestNpmScopeSegment(t *testing.T) {
	npm := requireTool(t, "npm")
	yarn, pnpm := requireJSClient(t, "yarn"), requireJSClient(t, "pnpm")
	w := newWorld(t, "github-acme.json")
	reg := newNpmRegistry(t, w, "@acme/widgets", "@other/x")
	w.proxy = w.startProxy(t, filepath.Join("testdata", "npm-scope.json"), "--resolve", "registry.npmjs.org:443:"+reg.up.addr)

	home := t.TempDir()
	writeFile(t, filepath.Join(home, ".npmrc"), []byte("//registry.npmjs.org/:_authToken=omnia-injected-npm-acme\n"))
	// yarn classic reads its registry from .yarnrc; the CA bundle and the
	// proxy come from the environment, as for npm and pnpm.
	writeFile(t, filepath.Join(home, ".yarnrc"), []byte("registry \"https://registry.npmjs.org/\"\n"))
	env := w.sandboxEnv(t, "HOME="+home, "NPM_CONFIG_CAFILE="+w.bundle, "NPM_CONFIG_REGISTRY=https://registry.npmjs.org/",
		"NPM_CONFIG_UPDATE_NOTIFIER=false", "NPM_CONFIG_AUDIT=false", "NPM_CONFIG_FUND=false", "NPM_CONFIG_FETCH_RETRIES=0",
		"YARN_CACHE_FOLDER="+filepath.Join(home, "yarn-cache"), "NPM_CONFIG_STORE_DIR="+filepath.Join(home, "pnpm-store"),
		"YARN_ENABLE_TELEMETRY=0", "DISABLE_OPENCOLLECTIVE=1")

	view := w.runClient(t, home, env, npm, "view", "@acme/widgets", "version")
	if view.err != nil || strings.TrimSpace(view.stdout) != "1.0.0" {
		t.Fatalf("npm view @acme/widgets version: %v\n%s%s", view.err, view.stdout, view.stderr)
	}
	for _, c := range []struct {
		name string
		bin  string
		args []string
	}{
		{name: "npm", bin: npm, args: []string{"install", "@acme/widgets"}},
		{name: "yarn", bin: yarn, args: []string{"add", "--non-interactive", "--no-progress", "@acme/widgets"}},
		{name: "pnpm", bin: pnpm, args: []string{"add", "@acme/widgets"}},
	} {
		project := t.TempDir()
		writeFile(t, filepath.Join(project, "package.json"), []byte(`{"name":"agent-work","version":"0.0.0","private":true}`))
		install := w.runClient(t, project, env, c.bin, c.args...)
		if install.err != nil {
			t.Fatalf("%s %s: %v\n%s%s", c.name, strings.Join(c.args, " "), install.err, install.stdout, install.stderr)
		}
		if _, err := os.Stat(filepath.Join(project, "node_modules", "@acme", "widgets", "index.js")); err != nil {
			t.Fatalf("%s installed no @acme/widgets: %v", c.name, err)
		}
		other := w.runClient(t, project, env, c.bin, append(c.args[:len(c.args)-1:len(c.args)-1], "@other/x")...)
		if other.err == nil {
			t.Fatalf("%s installed @other/x:\n%s%s", c.name, other.stdout, other.stderr)
		}
		if !strings.Contains(other.stdout+other.stderr, "403") {
			t.Errorf("%s failed on @other/x otherwise than with the proxy's 403:\n%s%s", c.name, other.stdout, other.stderr)
		}
	}
	across := w.runClient(t, home, env, npm, "view", "@acme/widgets%2fx", "version")
	if across.err == nil {
		t.Errorf("npm view @acme/widgets%%2fx succeeded:\n%s", across.stdout)
	}

	wantPublishRefused(t, w, env, npm)

	var docs, tarballs int
	for _, r := range reg.up.requests() {
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			t.Errorf("the registry got %s %s", r.Method, r.URI)
		case strings.Contains(strings.ToLower(r.URI), "other") || strings.Contains(strings.ToLower(r.URI), "widgets%2fx"):
			t.Errorf("the registry got %s %s, which the rule does not name", r.Method, r.URI)
		case strings.EqualFold(r.URI, "/@acme%2fwidgets"):
			docs++
		case r.URI == "/@acme/widgets/-/widgets-1.0.0.tgz":
			tarballs++
		}
		if r.Header.Get("Authorization") != "Bearer "+w.token {
			t.Errorf("%s %s reached the registry without the credential", r.Method, r.URI)
		}
	}
	// npm view and each client's install read the document with its %2f
	// as sent; each install fetches the tarball once.
	if docs < 4 || tarballs != 3 {
		t.Errorf("the registry got %d requests for the scoped document as sent and %d for its tarball: %v", docs, tarballs, reg.up.requests())
	}
	eventually(t, "the refusals in the proxy's log", func() bool {
		log := w.proxy.stderr.String()
		return strings.Contains(log, `"method":"PUT","path":"/@acme%2fwidgets","decision":"refuse","reason":"l7-not-allowed"`) &&
			strings.Contains(strings.ToLower(log), `"path":"/@other%2fx","decision":"refuse","reason":"l7-not-allowed"`)
	})
}

// npmRegistry stands in for registry.npmjs.org: each package's document
// (as /@scope%2fname, in either case, or /@scope/name) and its tarball,
// to requests with the credential; a PUT is answered as a publish.
type npmRegistry struct {
	up *upstream
}

func newNpmRegistry(t *testing.T, w *world, names ...string) *npmRegistry {
	t.Helper()
	docs, tarballs := map[string][]byte{}, map[string][]byte{}
	for _, name := range names {
		base := name[strings.IndexByte(name, '/')+1:]
		tgz := npmTarball(t, `{"name":"`+name+`","version":"1.0.0","main":"index.js"}`)
		sha := sha1.Sum(tgz)
		sum := sha512.Sum512(tgz)
		tarball := "/" + name + "/-/" + base + "-1.0.0.tgz"
		doc, err := json.Marshal(map[string]any{
			"name":      name,
			"dist-tags": map[string]string{"latest": "1.0.0"},
			"versions": map[string]any{"1.0.0": map[string]any{
				"name": name, "version": "1.0.0", "main": "index.js",
				"dist": map[string]string{
					"tarball":   "https://registry.npmjs.org" + tarball,
					"shasum":    hex.EncodeToString(sha[:]),
					"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
				},
			}},
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, uri := range []string{"/" + name, "/" + strings.Replace(name, "/", "%2f", 1), "/" + strings.Replace(name, "/", "%2F", 1)} {
			docs[uri] = doc
		}
		tarballs[tarball] = tgz
	}
	up := startUpstream(t, w.upstreamCA, []string{"registry.npmjs.org"}, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+w.token {
			http.Error(rw, "no credential", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPut {
			http.Error(rw, "published", http.StatusCreated)
			return
		}
		if doc, ok := docs[r.RequestURI]; ok {
			rw.Header().Set("Content-Type", "application/json")
			rw.Write(doc)
			return
		}
		if tgz, ok := tarballs[r.RequestURI]; ok {
			rw.Header().Set("Content-Type", "application/octet-stream")
			rw.Write(tgz)
			return
		}
		http.NotFound(rw, r)
	}))
	return &npmRegistry{up: up}
}

// requireJSClient returns the path of yarn or pnpm as scripts/js-clients.sh
// installs them (make test-deps runs it), failing the test, never
// skipping it, when they are missing.
func requireJSClient(t *testing.T, name string) string {
	t.Helper()
	cache := os.Getenv("KEYHOLE_CACHE")
	if cache == "" {
		cache = filepath.Join("..", "..", ".cache")
	}
	p, err := filepath.Abs(filepath.Join(cache, "js-clients", "node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed: run scripts/js-clients.sh (make test-deps runs it): %v", name, err)
	}
	return p
}

// npmTarball is an npm package tarball holding package.json and an
// index.js.
func npmTarball(t *testing.T, packageJSON string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range map[string]string{"package/package.json": packageJSON, "package/index.js": "module.exports = 1;\n"} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
