package source_test

import (
	"os"
	"testing"

	"keyhole.dev/keyhole/source"
	"keyhole.dev/keyhole/source/engines"
)

// TestMain gives source's own tests the engines' packages, which import
// source and so only a test of package source_test may import.
func TestMain(m *testing.M) {
	source.SetTestEngines(engines.All())
	os.Exit(m.Run())
}
