package diff

import (
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/compiler"
)

// TestCompareGate: which changes to the gate loosen it.
func TestCompareGate(t *testing.T) {
	e := func(what, value string) compiler.GateEntry { return compiler.GateEntry{What: what, Value: value} }
	ceiling := e(compiler.GateCeiling, `{"hosts":["api.github.com"]}`)
	exclude := e(compiler.GateExclude, "legacy/")
	incA, incB := e(compiler.GateInclude, "apps/"), e(compiler.GateInclude, "infra/")
	ignore := e(compiler.GateIgnore, `{"code":"ConnectionUnbound"}`)
	annotation := e(compiler.GateAnnotation, "Connection agents/x: ConnectionInjectUnrestricted")
	setting := e(compiler.GateSetting, "namespace: agents")
	for name, tc := range map[string]struct {
		base, head compiler.Gate
		loosens    []bool // per change, in CompareGate's order
	}{
		"nothing changed":             {base: compiler.Gate{ceiling, exclude}, head: compiler.Gate{ceiling, exclude}},
		"a ceiling entry removed":     {base: compiler.Gate{ceiling}, loosens: []bool{true}},
		"a ceiling entry added":       {head: compiler.Gate{ceiling}, loosens: []bool{false}},
		"an exclude added":            {head: compiler.Gate{exclude}, loosens: []bool{true}},
		"an exclude removed":          {base: compiler.Gate{exclude}, loosens: []bool{false}},
		"the first include added":     {head: compiler.Gate{incA}, loosens: []bool{true}},
		"another include added":       {base: compiler.Gate{incA}, head: compiler.Gate{incA, incB}, loosens: []bool{false}},
		"an include of two removed":   {base: compiler.Gate{incA, incB}, head: compiler.Gate{incA}, loosens: []bool{true}},
		"the last include removed":    {base: compiler.Gate{incA}, loosens: []bool{false}},
		"an ignore entry added":       {head: compiler.Gate{ignore}, loosens: []bool{true}},
		"an ignore entry removed":     {base: compiler.Gate{ignore}, loosens: []bool{false}},
		"an annotation code added":    {head: compiler.Gate{annotation}, loosens: []bool{true}},
		"an annotation code removed":  {base: compiler.Gate{annotation}, loosens: []bool{false}},
		"another setting, either way": {base: compiler.Gate{setting}, head: compiler.Gate{e(compiler.GateSetting, "namespace: other")}, loosens: []bool{true, true}},
	} {
		t.Run(name, func(t *testing.T) {
			cs := CompareGate(tc.base, tc.head)
			var got []bool
			for _, c := range cs {
				got = append(got, c.Loosens)
			}
			if !slices.Equal(got, tc.loosens) {
				t.Errorf("loosens %v, want %v: %+v", got, tc.loosens, cs)
			}
			r := Result{Gate: cs}
			if r.Changed() != (len(cs) > 0) {
				t.Errorf("Changed() = %v with %d changes to the gate", r.Changed(), len(cs))
			}
			want := 0
			for _, l := range tc.loosens {
				if l {
					want++
				}
			}
			// A loosening line says how it loosens, in words of its own
			// entry's kind; a setting's is the one keyhole cannot weigh.
			for _, c := range cs {
				line := gateLine(c)
				if c.Loosens != strings.Contains(line, " (loosens the gate: ") {
					t.Errorf("%q: loosens %v", line, c.Loosens)
				}
				if c.Loosens && (c.What == compiler.GateSetting) != strings.Contains(line, "review what it changes") {
					t.Errorf("%q: the reason is not its kind's", line)
				}
			}
			if n := len(r.GateTripped([]string{GateWidened})); n != want {
				t.Errorf("--fail-on widened trips on %d changes, want %d", n, want)
			}
		})
	}
}
