package compiler

import (
	"fmt"
	"strings"
	"testing"
)

// TestCeilingNoSecret: what the ceiling's proof reports (the fixture's
// breaks, the plan's ceiling, its sandboxes' labels) holds no value of
// the Secret the sandboxes' Connections read, whose token is a canary.
func TestCeilingNoSecret(t *testing.T) {
	t.Chdir("testdata/checks")
	res := compileDir(t, "ceiling", Options{DefaultSandboxImage: "ghcr.io/acme/fixture:1"})
	n := 0
	for _, d := range res.Diagnostics {
		if d.Code == codeAccessAboveCeiling {
			n++
		}
		if strings.Contains(d.String(), "canary-ceiling") {
			t.Errorf("a diagnostic holds the Secret's value: %s", d)
		}
	}
	if n == 0 {
		t.Fatal("the fixture breaks no ceiling")
	}
	if s := fmt.Sprintf("%+v", res.Plan); strings.Contains(s, "canary-ceiling") {
		t.Error("the plan holds the Secret's value")
	}
}
