package cli

import (
	"testing"

	"keyhole.dev/keyhole/internal/golden"
)

// TestChecksDoc keeps docs/checks.md equal to what the check table and
// the renderer's rules generate: `go generate ./cli/docgen` (or
// KEYHOLE_UPDATE=1) rewrites it.
func TestChecksDoc(t *testing.T) {
	golden.Check(t, "../docs/checks.md", ChecksDoc())
}
