//go:build e2e

package cli

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fakeRelease is a release server on loopback: per version the files
// under /VERSION/, and every path it was asked for.
type fakeRelease struct {
	mu     sync.Mutex
	files  map[string][]byte
	status int // answered to every request when set
	asked  []string
}

func (f *fakeRelease) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r.URL.Path)
	if f.status != 0 {
		w.WriteHeader(f.status)
		return
	}
	b, ok := f.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(b)
}

// releaseArchive is keyhole_VERSION_OS_ARCH.tar.gz as the release
// workflow makes it, for this platform, its keyhole a script that says
// which version it is.
func releaseArchive(t *testing.T, version string) (name string, data []byte) {
	t.Helper()
	dir := fmt.Sprintf("keyhole_%s_%s_%s", version, runtime.GOOS, runtime.GOARCH)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		body string
	}{
		{dir + "/README.md", "keyhole\n"},
		{dir + "/keyhole", "#!/bin/sh\necho \"keyhole " + version + " (fake release)\"\n"},
		{dir + "/keyhole-proxy", "#!/bin/sh\nexit 1\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o755, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return dir + ".tar.gz", buf.Bytes()
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestDownloadKeyhole runs scripts/download-keyhole.sh, which the Action
// and the pre-commit hook install keyhole with, against a fake release
// on loopback: a good archive is installed and runs; a tampered one, or
// one checksums.txt does not list, is refused and nothing is installed;
// a release or archive that does not exist, or a version that is not a
// release tag, is exit 3, the callers' signal to build from source.
func TestDownloadKeyhole(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not on PATH: %v", tool, err)
		}
	}
	script, err := filepath.Abs("../scripts/download-keyhole.sh")
	if err != nil {
		t.Fatal(err)
	}
	const version = "v1.2.3"
	name, good := releaseArchive(t, version)
	tampered := bytes.Clone(good)
	tampered[len(tampered)/2] ^= 0xff
	tests := map[string]struct {
		version string
		files   map[string][]byte
		status  int
		exit    int
		stderr  string
		asked   int // requests the server got; -1 for any
	}{
		"good archive": {
			files:  map[string][]byte{"/" + version + "/checksums.txt": []byte(sum(good) + "  " + name + "\n"), "/" + version + "/" + name: good},
			stderr: "installed keyhole_" + version, asked: 2,
		},
		"binary-mode checksum line": {
			files:  map[string][]byte{"/" + version + "/checksums.txt": []byte(sum([]byte("x")) + "  other.tar.gz\n" + sum(good) + " *" + name + "\n"), "/" + version + "/" + name: good},
			stderr: "installed keyhole_" + version, asked: 2,
		},
		"tampered archive": {
			files: map[string][]byte{"/" + version + "/checksums.txt": []byte(sum(good) + "  " + name + "\n"), "/" + version + "/" + name: tampered},
			exit:  1, stderr: "does not match checksums.txt of " + version + " (SHA-256 " + sum(tampered) + ", want " + sum(good) + "): refusing to install it", asked: 2,
		},
		"archive not listed": {
			files: map[string][]byte{"/" + version + "/checksums.txt": []byte(sum(good) + "  keyhole_" + version + "_plan9_386.tar.gz\n"), "/" + version + "/" + name: good},
			exit:  1, stderr: "lists no SHA-256 for " + name, asked: 2,
		},
		"no release": {
			files: map[string][]byte{},
			exit:  3, stderr: "no release to download: " + "%s/" + version + "/checksums.txt is not found (HTTP 404)", asked: 1,
		},
		"no archive for this platform": {
			files: map[string][]byte{"/" + version + "/checksums.txt": []byte(sum(good) + "  " + name + "\n")},
			exit:  3, stderr: "release " + version + " has no " + strings.TrimSuffix(name, ".tar.gz") + ".tar.gz (HTTP 404)", asked: 2,
		},
		"server error": {
			status: http.StatusBadGateway,
			exit:   1, stderr: "HTTP 502", asked: -1,
		},
		"a commit": {
			version: "5124f20c9e5e0123456789abcdef0123456789ab",
			exit:    3, stderr: "5124f20c9e5e0123456789abcdef0123456789ab is not a release tag",
		},
		"a branch":     {version: "main", exit: 3, stderr: "main is not a release tag"},
		"no version":   {version: "-", exit: 3, stderr: "no version given"},
		"path in name": {version: "v1.2.3/../../x", exit: 3, stderr: "is not a release tag"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rel := &fakeRelease{files: tc.files, status: tc.status}
			srv := httptest.NewServer(rel)
			defer srv.Close()
			v := tc.version
			switch v {
			case "":
				v = version
			case "-":
				v = ""
			}
			dir := filepath.Join(t.TempDir(), "bin")
			cmd := exec.Command("bash", script, v, dir)
			cmd.Env = append(os.Environ(), "KEYHOLE_RELEASES="+srv.URL)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			exit := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				exit = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			want := tc.stderr
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, srv.URL)
			}
			if exit != tc.exit || !strings.Contains(stderr.String(), want) {
				t.Fatalf("exit %d, stderr:\n%s\nwant exit %d and %q", exit, stderr.String(), tc.exit, want)
			}
			rel.mu.Lock()
			asked := len(rel.asked)
			rel.mu.Unlock()
			if tc.asked >= 0 && asked != tc.asked {
				t.Errorf("the server was asked for %d files, want %d", asked, tc.asked)
			}
			out, err := exec.Command(filepath.Join(dir, "keyhole")).Output()
			if tc.exit != 0 {
				if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
					t.Errorf("%s exists after a refusal (%v)", dir, serr)
				}
				return
			}
			if err != nil || string(out) != "keyhole "+version+" (fake release)\n" {
				t.Fatalf("the installed keyhole: %q, %v", out, err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("%s holds %d files, want keyhole alone", dir, len(entries))
			}
		})
	}
}

// TestActionDownloadStep runs action.yml's download step as the runner
// would, against a fake release of the Action's repository on loopback:
// a verified archive is put on the PATH and the source build skipped
// (installed=true); a tampered one fails the step, with nothing on the
// PATH; a ref with no release says the source build follows
// (installed=false).
func TestActionDownloadStep(t *testing.T) {
	root, wrappers := actionStepWrappers(t)
	wrapper := wrappers["download"]
	if wrapper == "" {
		t.Fatal("action.yml has no download shell step")
	}
	const version = "v1.2.3"
	name, good := releaseArchive(t, version)
	tampered := bytes.Clone(good)
	tampered[len(tampered)-10] ^= 0xff
	at := "/acme/keyhole/releases/download/" + version + "/"
	tests := map[string]struct {
		files            map[string][]byte
		fail             bool
		installed, print string
	}{
		"release":    {files: map[string][]byte{at + "checksums.txt": []byte(sum(good) + "  " + name + "\n"), at + name: good}, installed: "true", print: "keyhole " + version + " (fake release)"},
		"tampered":   {files: map[string][]byte{at + "checksums.txt": []byte(sum(good) + "  " + name + "\n"), at + name: tampered}, fail: true, print: "refusing to install it"},
		"no release": {files: map[string][]byte{}, installed: "false", print: "building keyhole from the Action's source instead"},
	}
	for tname, tc := range tests {
		t.Run(tname, func(t *testing.T) {
			srv := httptest.NewServer(&fakeRelease{files: tc.files})
			defer srv.Close()
			work := t.TempDir()
			step := filepath.Join(work, "download.sh")
			writeTestFile(t, step, wrapper)
			if err := os.MkdirAll(filepath.Join(work, "runner-temp"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command("bash", step)
			cmd.Dir = work
			cmd.Env = append(os.Environ(), "WORK="+work, "RUNNER_TEMP="+filepath.Join(work, "runner-temp"),
				"GITHUB_PATH="+filepath.Join(work, "github-path"), "GITHUB_SERVER_URL="+srv.URL,
				"GITHUB_ACTION_REPOSITORY=acme/keyhole", "GITHUB_ACTION_REF="+version, "GITHUB_ACTION_PATH="+root)
			out, err := cmd.CombinedOutput()
			if (err != nil) != tc.fail || !strings.Contains(string(out), tc.print) {
				t.Fatalf("the step: %v, want failure %v and %q in its log:\n%s", err, tc.fail, tc.print, out)
			}
			outputs, _ := os.ReadFile(filepath.Join(work, "outputs", "download"))
			path, _ := os.ReadFile(filepath.Join(work, "github-path"))
			want := ""
			if tc.installed != "" {
				want = "installed=" + tc.installed + "\n"
			}
			if string(outputs) != want {
				t.Errorf("outputs %q, want %q", outputs, want)
			}
			if onPath := len(path) > 0; onPath != (tc.installed == "true") {
				t.Errorf("GITHUB_PATH holds %q", path)
			}
		})
	}
}

func writeTestFile(t *testing.T, name, body string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
