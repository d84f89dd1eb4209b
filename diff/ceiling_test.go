package diff

import (
	"slices"
	"strings"
	"testing"

	"keyhole.dev/keyhole/access"
	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy/config"
)

// TestCeilingVerdict: a widening is weighed against the head's ceiling,
// per sandbox as its selector picks them: two sandboxes widened the same
// way fall on either side of a ceiling that binds one, and the reports
// say each apart; a narrowing is not weighed.
func TestCeilingVerdict(t *testing.T) {
	sandbox := func(name string, rules ...config.Rule) compiler.Sandbox {
		c := plan([]config.Host{gh(rules...)})
		c.Sandbox = config.SandboxRef{Namespace: "agents", Name: name}
		return compiler.Sandbox{Namespace: "agents", Name: name, Proxy: *c}
	}
	reads := prefixes("GET", "/repos/acme")
	members := prefixes("POST", "/orgs/acme/members")
	ceiling := access.Ceiling{Limits: []access.Limit{{
		Sandboxes: access.Selector{Name: "prod-*"},
		Hosts:     []string{"api.github.com"}, Methods: []string{"POST"}, PathPatterns: []string{"/orgs/**"},
	}}}
	base := Side{Ref: Ref{Name: "base"}, Sandboxes: []compiler.Sandbox{sandbox("dev-a", reads), sandbox("prod-a", reads), sandbox("prod-b", reads, members)}}
	head := Side{Ref: Ref{Name: "head"}, Ceiling: ceiling, Sandboxes: []compiler.Sandbox{sandbox("dev-a", reads, members), sandbox("prod-a", reads, members), sandbox("prod-b", reads)}}
	r := Compare(base, head)
	got := map[string]string{}
	for _, s := range r.Sandboxes {
		got[s.Name] = string(s.Verdict) + "/" + s.Ceiling
		if s.Ceiling == CeilingAbove {
			if len(s.AboveCeiling) != 1 || s.AboveCeiling[0].Method != "POST" || s.AboveCeiling[0].URL != "https://api.github.com/orgs/acme/members" {
				t.Errorf("%s: above the ceiling by %+v", s.Name, s.AboveCeiling)
			}
		}
	}
	want := map[string]string{"dev-a": "widened/under", "prod-a": "widened/above", "prod-b": "narrowed/"}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: %s, want %s", name, got[name], w)
		}
	}
	var text strings.Builder
	if err := Write(&text, FormatText, r); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"ceiling: under: the head allows nothing keyhole.yaml's ceiling forbids",
		"ceiling: ABOVE: the head allows what keyhole.yaml's ceiling forbids:",
		"POST https://api.github.com/orgs/acme/members, above: nothing on api.github.com for POST under /orgs/** (sandboxes: name prod-*)",
	} {
		if !strings.Contains(text.String(), line) {
			t.Errorf("the text report lacks %q:\n%s", line, text.String())
		}
	}
	var verdicts []string
	for _, g := range groups(r) {
		verdicts = append(verdicts, g.first().Ceiling)
	}
	if !slices.Contains(verdicts, CeilingAbove) || !slices.Contains(verdicts, CeilingUnder) {
		t.Errorf("groups %v: the sandboxes above and under the ceiling share one", verdicts)
	}
}
