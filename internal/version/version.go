// Package version says which keyhole a binary is: the module version and
// the source revision, the same for `keyhole version` and
// `keyhole-proxy --version` whatever built them.
//
// Three build paths stamp them, in this order of precedence:
//
//   - the linker, for builds outside a checkout (the images, the release):
//     go build -ldflags "-X keyhole.dev/keyhole/internal/version.version=v1.2.3 -X keyhole.dev/keyhole/internal/version.revision=<commit>"
//     (scripts/version-ldflags.sh prints exactly this for the checkout it runs in);
//   - the go command's build info: `go install keyhole.dev/keyhole/cmd/keyhole@v1.2.3`
//     records the module version, and a build in a git checkout records
//     the version git's tags give and the commit (vcs.revision, vcs.modified);
//   - neither: "(devel)" and no revision.
//
// It imports only the standard library, so the proxy binary can use it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker (-X); empty otherwise. They are the only package
// variables in keyhole, and nothing at run time writes them.
var (
	version  string
	revision string
)

// Info is what a binary knows of its own build.
type Info struct {
	// Version is the module version, e.g. v0.1.0 or a pseudo-version;
	// "(devel)" when nothing stamped one.
	Version string
	// Revision is the commit the binary was built from, "" when unknown
	// (a module downloaded by `go install ...@v1.2.3` carries none).
	Revision string
	// Modified reports a build from a checkout with uncommitted changes.
	Modified bool
	// Go and Platform are the toolchain and GOOS/GOARCH.
	Go, Platform string
}

// Get returns the binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return get(bi, version, revision)
}

// get is Get with its inputs, for tests.
func get(bi *debug.BuildInfo, ldVersion, ldRevision string) Info {
	info := Info{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if v := bi.Main.Version; v != "" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if ldVersion != "" {
		info.Version = ldVersion
	}
	if ldRevision != "" {
		info.Revision, info.Modified = strings.TrimSuffix(ldRevision, "-dirty"), strings.HasSuffix(ldRevision, "-dirty")
	}
	return info
}

// Short is the version and the revision's first twelve characters, e.g.
// "v0.1.0 (5124f20c9e5e)" or "v0.1.0 (5124f20c9e5e, modified)"; the
// revision is left out when unknown.
func (i Info) Short() string {
	if i.Revision == "" {
		return i.Version
	}
	rev := i.Revision[:min(12, len(i.Revision))]
	if i.Modified {
		rev += ", modified"
	}
	return fmt.Sprintf("%s (%s)", i.Version, rev)
}

// String is the line both binaries print after their name, e.g.
// "v0.1.0 (5124f20c9e5e) go1.26.0 linux/amd64".
func (i Info) String() string {
	return i.Short() + " " + i.Go + " " + i.Platform
}

// Semantic is the version as SARIF's semanticVersion wants it, without
// the leading "v"; "" when the version is not semantic ("(devel)").
func (i Info) Semantic() string {
	v, ok := strings.CutPrefix(i.Version, "v")
	if !ok || v == "" || !isDigit(v[0]) {
		return ""
	}
	return v
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
