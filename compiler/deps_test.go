package compiler

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDepsFreeOfTheServer: the compiler shares the proxy's decision
// logic (proxy/policy) and config (proxy/config), never the server
// package with its listeners, file watches and transports.
func TestDepsFreeOfTheServer(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to list dependencies: %v", err)
	}
	for _, pkg := range []string{"keyhole.dev/keyhole/compiler", "keyhole.dev/keyhole/proxy/policy"} {
		out, err := exec.Command(goBin, "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "keyhole.dev/keyhole/proxy/config") {
			t.Fatalf("go list -deps %s does not list proxy/config; is the listing whole?\n%s", pkg, out)
		}
		if slices.Contains(deps, "keyhole.dev/keyhole/proxy") {
			t.Errorf("%s depends on the proxy server package keyhole.dev/keyhole/proxy", pkg)
		}
	}
}
