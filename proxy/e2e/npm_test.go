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
	tgz := npmTarball(t, `{"name":"@acme/widgets","version":"1.0.0","main":"index.js"}`)
	sha := sha1.Sum(tgz)
	sum := sha512.Sum512(tgz)
	packument, err := json.Marshal(map[string]any{
		"name":      "@acme/widgets",
		"dist-tags": map[string]string{"latest": "1.0.0"},
		"versions": map[string]any{"1.0.0": map[string]any{
			"name": "@acme/widgets", "version": "1.0.0", "main": "index.js",
			"dist": map[string]string{
				"tarball":   "https://registry.npmjs.org/@acme/widgets/-/widgets-1.0.0.tgz",
				"shasum":    hex.EncodeToString(sha[:]),
				"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum[:]),
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	registry := startUpstream(t, w.upstreamCA, []string{"registry.npmjs.org"}, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+w.token {
			http.Error(rw, "no credential", http.StatusUnauthorized)
			return
		}
		switch r.RequestURI {
		case "/@acme%2fwidgets", "/@acme%2Fwidgets":
			if r.Method == http.MethodPut {
				http.Error(rw, "published", http.StatusCreated)
				return
			}
			rw.Header().Set("Content-Type", "application/json")
			rw.Write(packument)
		case "/@acme/widgets/-/widgets-1.0.0.tgz":
			rw.Header().Set("Content-Type", "application/octet-stream")
			rw.Write(tgz)
		default:
			http.NotFound(rw, r)
		}
	}))
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

	pkg := t.TempDir()
	writeFile(t, filepath.Join(pkg, "package.json"), []byte(`{"name":"@acme/widgets","version":"1.0.1"}`))
	publish := w.runClient(t, pkg, env, npm, "publish", "--access", "restricted")
	if publish.err == nil {
		t.Fatalf("npm publish succeeded:\n%s%s", publish.stdout, publish.stderr)
	}
	if !strings.Contains(publish.stderr, "403") {
		t.Errorf("npm publish failed otherwise than with the proxy's 403:\n%s", publish.stderr)
	}

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
