package compiler

import (
	"strings"
	"testing"

	"keyhole.dev/keyhole/schema"
)

// TestOperatorDeclared: the Plan names the operator the input was checked
// for; --operator-version wins over keyhole.yaml; an unknown version is
// a ConfigInvalid error naming the known ones.
func TestOperatorDeclared(t *testing.T) {
	declared, err := schema.LookupOperator("v0.9.0-beta.17")
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		dir      string
		opts     Options
		want     schema.Operator
		wantDiag string
	}{
		"no declaration": {
			dir:  "../examples/github-acme",
			want: schema.DefaultOperator(),
		},
		"keyhole.yaml declares a release without the sandbox feature": {
			dir:      "testdata/checks/operator-sandbox-unsupported",
			want:     declared,
			wantDiag: "OperatorSandboxUnsupported",
		},
		"the flag declares it": {
			dir:      "../examples/github-acme",
			opts:     Options{OperatorVersion: "v0.9.0-beta.17"},
			want:     declared,
			wantDiag: "OperatorSandboxUnsupported",
		},
		"an unknown version from the flag": {
			dir:      "../examples/github-acme",
			opts:     Options{OperatorVersion: "v1.0.0"},
			want:     schema.DefaultOperator(),
			wantDiag: `ConfigInvalid: --operator-version "v1.0.0" has no schema in keyhole (it knows v0.9.0-beta.17.0.20260724164730-c7428e31ec64, v0.9.0-beta.17)`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res := compileDir(t, tc.dir, tc.opts)
			if res.Plan.Operator != tc.want {
				t.Errorf("Plan.Operator = %+v, want %+v", res.Plan.Operator, tc.want)
			}
			got := string(render(res.Diagnostics))
			if tc.wantDiag == "" && res.Diagnostics.HasErrors() {
				t.Errorf("unexpected errors:\n%s", got)
			}
			if tc.wantDiag != "" && !strings.Contains(got, tc.wantDiag) {
				t.Errorf("want %q among:\n%s", tc.wantDiag, got)
			}
		})
	}
}
