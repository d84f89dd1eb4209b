package version

import (
	"runtime/debug"
	"testing"
)

func TestGet(t *testing.T) {
	const rev = "5124f20c9e5e0123456789abcdef0123456789ab"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	tests := map[string]struct {
		bi                   *debug.BuildInfo
		ldVersion, ldRevison string
		wantShort            string
		wantSemantic         string
	}{
		"no build info": {
			wantShort: "(devel)",
		},
		"go run: devel, no vcs": {
			bi:        &debug.BuildInfo{Main: debug.Module{Path: "keyhole.dev/keyhole", Version: "(devel)"}},
			wantShort: "(devel)",
		},
		"go install at a tag: version, no revision": {
			bi:           &debug.BuildInfo{Main: debug.Module{Path: "keyhole.dev/keyhole", Version: "v0.1.0"}},
			wantShort:    "v0.1.0",
			wantSemantic: "0.1.0",
		},
		"go build in a clean checkout": {
			bi:           &debug.BuildInfo{Main: debug.Module{Version: "v0.1.1-0.20261130120000-5124f20c9e5e"}, Settings: vcs("false")},
			wantShort:    "v0.1.1-0.20261130120000-5124f20c9e5e (5124f20c9e5e)",
			wantSemantic: "0.1.1-0.20261130120000-5124f20c9e5e",
		},
		"go build in a modified checkout": {
			bi:           &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0+dirty"}, Settings: vcs("true")},
			wantShort:    "v0.1.0+dirty (5124f20c9e5e, modified)",
			wantSemantic: "0.1.0+dirty",
		},
		"linker stamps win over build info": {
			bi:           &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("true")},
			ldVersion:    "v0.2.0",
			ldRevison:    "abcdef0123456789",
			wantShort:    "v0.2.0 (abcdef012345)",
			wantSemantic: "0.2.0",
		},
		"linker revision of a modified checkout": {
			ldRevison: "abcdef0123456789-dirty",
			wantShort: "(devel) (abcdef012345, modified)",
		},
		"linker revision alone keeps the module version": {
			bi:           &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}},
			ldRevison:    "abc",
			wantShort:    "v0.1.0 (abc)",
			wantSemantic: "0.1.0",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			info := get(tc.bi, tc.ldVersion, tc.ldRevison)
			if got := info.Short(); got != tc.wantShort {
				t.Errorf("Short() = %q, want %q", got, tc.wantShort)
			}
			if got := info.Semantic(); got != tc.wantSemantic {
				t.Errorf("Semantic() = %q, want %q", got, tc.wantSemantic)
			}
			if got, want := info.String(), info.Short()+" "+info.Go+" "+info.Platform; got != want {
				t.Errorf("String() = %q, want %q", got, want)
			}
		})
	}
}
