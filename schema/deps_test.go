package schema

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoCUEAtRunTime keeps the point of generating JSON Schema: the
// package validates without CUE, so binaries that import it do not carry
// the CUE evaluator. Only the generator and tests import cuelang.org/go.
func TestNoCUEAtRunTime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "keyhole.dev/keyhole/schema").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "cuelang.org/") {
			t.Errorf("schema imports %s at run time", dep)
		}
	}
}
