package flux

import (
	"strings"

	"go.yaml.in/yaml/v3"

	"keyhole.dev/keyhole/source"
)

// revision is the revision a GitRepository's spec.ref names, as
// source-controller reads it (commit first, then name, semver, tag,
// branch), and whether it is a semver range. A full reference name
// names its tag or branch.
func revision(ref *yaml.Node) (rev string, semver bool) {
	if c := source.StringField(ref, "commit"); c != "" {
		return c, false
	}
	if n := source.StringField(ref, "name"); n != "" {
		for _, p := range []string{"refs/tags/", "refs/heads/"} {
			if r, ok := strings.CutPrefix(n, p); ok {
				return r, false
			}
		}
		return n, false
	}
	if s := source.StringField(ref, "semver"); s != "" {
		return s, true
	}
	if t := source.StringField(ref, "tag"); t != "" {
		return t, false
	}
	return source.StringField(ref, "branch"), false
}
