package diff

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"keyhole.dev/keyhole/bench/gen/synth"
)

// generatedChange renders bench/gen's synthetic repository (400
// Connections in 4 files, 100 AgentRuntimes, 600 agents) and the same
// repository after a pull request that touches every file: each
// runtime's shape-2 Connection widens its POST prefix to /repos/team and
// its shape-3 one stops allowing DELETE (one change per runtime, each on
// its own hosts), and every agent gets one more allowed domain (the same
// change, shared by hundreds of sandboxes).
func generatedChange(t testing.TB) (base, head Side) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if _, err := synth.Generate(dir, synth.Options{Connections: 400, Agents: 600}); err != nil {
		t.Fatal(err)
	}
	base = renderDir(t, "main", dir)
	edits, err := synth.Change(dir, func(agent string) string {
		if strings.Contains(agent, "allowed_domains: [pypi.org, files.pythonhosted.org]") {
			return strings.Replace(agent, "files.pythonhosted.org]", "files.pythonhosted.org, registry.npmjs.org]", 1)
		}
		return agent + "allowed_domains: [proxy.golang.org]\n"
	})
	if err != nil {
		t.Fatal(err)
	}
	if edits < 400 {
		t.Fatalf("the change edits %d files, want every agent and Connection file", edits)
	}
	return base, renderDir(t, "pr", dir)
}

// copies returns side with its sandboxes repeated n times, copy k in
// namespaces suffixed -k; with distinct, each copy's hosts are renamed
// too, so that no two copies share a change.
func copies(s Side, n int, distinct bool) Side {
	out := s
	out.Sandboxes = nil
	for k := range n {
		for _, sb := range s.Sandboxes {
			c := sb
			c.Namespace = fmt.Sprintf("%s-%d", cmpOr(sb.Namespace, "agents"), k)
			c.Proxy.Hosts = slices.Clone(sb.Proxy.Hosts)
			c.Proxy.Passthrough = slices.Clone(sb.Proxy.Passthrough)
			if distinct {
				for i := range c.Proxy.Hosts {
					c.Proxy.Hosts[i].Name = fmt.Sprintf("c%d.%s", k, c.Proxy.Hosts[i].Name)
				}
				for i := range c.Proxy.Passthrough {
					c.Proxy.Passthrough[i] = fmt.Sprintf("c%d.%s", k, c.Proxy.Passthrough[i])
				}
			}
			out.Sandboxes = append(out.Sandboxes, c)
		}
	}
	return out
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestMarkdownLimitGenerated: on a generated repository whose change
// touches hundreds of sandboxes, and on copies of it with thousands, the
// markdown report never exceeds the limit, says shared changes once,
// leads with what widened, and counts every sandbox it leaves out.
func TestMarkdownLimitGenerated(t *testing.T) {
	base, head := generatedChange(t)
	for name, tc := range map[string]struct {
		copies   int
		distinct bool
		noFiles  bool
	}{
		"the repository":                         {copies: 1},
		"4,000 sandboxes, shared changes":        {copies: 8},
		"4,000 sandboxes, each copy its own":     {copies: 8, distinct: true},
		"4,000 sandboxes, no resources compared": {copies: 8, distinct: true, noFiles: true},
	} {
		t.Run(name, func(t *testing.T) {
			b, h := copies(base, tc.copies, tc.distinct), copies(head, tc.copies, tc.distinct)
			if tc.noFiles {
				b.Files, h.Files = nil, nil
			}
			r := Compare(b, h)
			v := r.Verdicts()
			if len(r.Sandboxes) < 500*tc.copies || v[VerdictChanged] < 100*tc.copies || v[VerdictWidened] < 300*tc.copies {
				t.Fatalf("%d sandboxes changed, verdicts %v: the change is not the one described", len(r.Sandboxes), v)
			}
			var md bytes.Buffer
			if err := Write(&md, FormatMarkdown, r); err != nil {
				t.Fatal(err)
			}
			out := md.String()
			if md.Len() > MarkdownLimit {
				t.Fatalf("markdown is %d bytes, over %d", md.Len(), MarkdownLimit)
			}
			checkMarkdownAccounts(t, r, out)
			if !strings.Contains(out, "sandboxes, the same change)") {
				t.Errorf("no change is said once for several sandboxes")
			}
			// The text report is never cut.
			var text bytes.Buffer
			if err := Write(&text, FormatText, r); err != nil {
				t.Fatal(err)
			}
			all := text.String()
			for _, s := range r.Sandboxes {
				if !strings.Contains(all, s.ID()) {
					t.Fatalf("the text report lacks %s", s.ID())
				}
			}
		})
	}
}

var (
	mdGroupLine = regexp.MustCompile(`(?m)^- (:warning: )?\*?\*?(widened|changed|cannot decide|narrowed|unchanged)\*?\*?: .*$`)
	mdGroupSize = regexp.MustCompile(`\((\d+) sandboxes, the same change\)`)
	mdLeftOut   = regexp.MustCompile(`…and (\d+) more sandbox(es)? \(([^)]*)\) left out`)
)

// checkMarkdownAccounts asserts that the markdown report's verdict table
// counts every sandbox, that its groups come most-needing-review first,
// and that the sandboxes its groups show plus those it says it left out
// are all of them.
func checkMarkdownAccounts(t *testing.T, r Result, out string) {
	t.Helper()
	for verdict, n := range r.Verdicts() {
		if !strings.Contains(out, fmt.Sprintf("| %s | %d |", mdVerdict(verdict), n)) {
			t.Errorf("the verdict table lacks %s = %d", verdict, n)
		}
	}
	shown, last := 0, -1
	for _, m := range mdGroupLine.FindAllStringSubmatch(out, -1) {
		v := Verdict(m[2])
		if m[2] == "cannot decide" {
			v = VerdictUndecided
		}
		if v.rank() < last {
			t.Errorf("group %q comes after a group of a later verdict", m[0])
		}
		last = v.rank()
		n := 1
		if s := mdGroupSize.FindStringSubmatch(m[0]); s != nil {
			n, _ = strconv.Atoi(s[1])
		}
		shown += n
	}
	left := 0
	if m := mdLeftOut.FindStringSubmatch(out); m != nil {
		left, _ = strconv.Atoi(m[1])
	}
	if shown+left != len(r.Sandboxes) {
		t.Errorf("the report shows %d sandboxes and leaves out %d, of %d", shown, left, len(r.Sandboxes))
	}
	if shown == 0 && len(r.Sandboxes) > 0 {
		t.Errorf("no group shown")
	}
}

// TestMarkdownLimitRandom: whatever the sizes of the names, rules,
// witnesses and diffs, the markdown report stays within the limit and
// accounts for every sandbox.
func TestMarkdownLimitRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	long := func(n int) string { return strings.Repeat("x", rng.IntN(n)+1) }
	for i := range 25 {
		var r Result
		r.Base, r.Head = Ref{Name: long(500)}, Ref{Name: "head"}
		for j := range rng.IntN(3000) {
			s := SandboxChange{Namespace: long(60), Name: fmt.Sprintf("s%d-%s", j, long(60)), Change: []Change{Added, Removed, Changed}[rng.IntN(3)]}
			s.Verdict = Verdicts()[rng.IntN(len(Verdicts()))]
			if s.Verdict == VerdictUndecided {
				s.Undecided = long(2000)
			}
			for range rng.IntN(8) {
				w := Witness{Method: "GET", URL: "https://h/" + long(1000), Rule: long(1000),
					Base: Outcome{Action: "refuse", Reason: "l7-not-allowed"}, Head: Outcome{Action: "inject", Credential: long(1000)}}
				if rng.IntN(2) == 0 {
					s.Widened = append(s.Widened, w)
				} else {
					w.Base, w.Head = w.Head, w.Base
					s.Narrowed = append(s.Narrowed, w)
				}
			}
			for range rng.IntN(30) {
				s.Hosts = append(s.Hosts, HostChange{Host: long(100), Change: Added, HeadInject: long(500), RulesAdded: []string{long(3000)}})
			}
			if rng.IntN(4) > 0 {
				// Many sandboxes share a few changes.
				s.Hosts, s.Widened, s.Narrowed, s.Undecided = nil, nil, nil, ""
				s.PassthroughAdded = []string{fmt.Sprintf("h%d.example", rng.IntN(5))}
			}
			r.Sandboxes = append(r.Sandboxes, s)
		}
		for j := range rng.IntN(500) {
			r.Resources = append(r.Resources, Resource{Change: Changed, Kind: long(300), BasePath: fmt.Sprintf("%d/%s", j, long(300)), Diff: long(5000)})
		}
		r.Kinds = kindCounts(r.Resources)
		var md bytes.Buffer
		if err := Write(&md, FormatMarkdown, r); err != nil {
			t.Fatal(err)
		}
		if md.Len() > MarkdownLimit {
			t.Fatalf("case %d: markdown is %d bytes, over %d", i, md.Len(), MarkdownLimit)
		}
		checkMarkdownAccounts(t, r, md.String())
		if t.Failed() {
			t.Fatalf("case %d", i)
		}
	}
}

// TestGroups: sandboxes with the same change are one group, whatever
// their names; a different witness or policy line makes another.
func TestGroups(t *testing.T) {
	w := Witness{Method: "GET", URL: "https://pypi.org/", Base: Outcome{Action: "refuse", Reason: "host-not-allowed"}, Head: Outcome{Action: "tunnel"}}
	same := func(ns, name string) SandboxChange {
		return SandboxChange{Namespace: ns, Name: name, Change: Changed, PassthroughAdded: []string{"pypi.org"}, Access: Access{Verdict: VerdictWidened, Widened: []Witness{w}}}
	}
	other := same("b", "x")
	other.PassthroughAdded = []string{"files.pythonhosted.org"}
	narrowed := SandboxChange{Namespace: "a", Name: "n", Change: Removed, Access: Access{Verdict: VerdictNarrowed}}
	gs := groups(Result{Sandboxes: []SandboxChange{narrowed, same("a", "x"), other, same("c", "y")}})
	var got []string
	for _, g := range gs {
		var names []string
		for _, s := range g.sandboxes {
			names = append(names, s.ID())
		}
		got = append(got, string(g.verdict)+" "+strings.Join(names, ","))
	}
	want := []string{"widened a/x,c/y", "widened b/x", "narrowed a/n"}
	if !slices.Equal(got, want) {
		t.Errorf("groups = %q, want %q", got, want)
	}
}

// TestSandboxVerdicts: the verdict of each sandbox of a rendered change,
// through Compare, with the plan's own configs.
func TestSandboxVerdicts(t *testing.T) {
	base := acme()
	for name, tc := range map[string]struct {
		head map[string]string
		want Verdict
	}{
		"a covered rule added": {
			head: with(t, base, "connection.yaml", "            pathPrefixes: [/repos/acme/widgets]\n",
				"            pathPrefixes: [/repos/acme/widgets]\n          - methods: [GET]\n            pathPrefixes: [/repos/acme/widgets/pulls]\n"),
			want: VerdictUnchanged,
		},
		"a prefix shortened": {
			head: with(t, base, "connection.yaml", "pathPrefixes: [/repos/acme/widgets]", "pathPrefixes: [/repos/acme]"),
			want: VerdictWidened,
		},
		"a method dropped": {
			head: with(t, base, "connection.yaml", "methods: [GET, HEAD]", "methods: [GET]"),
			want: VerdictNarrowed,
		},
		"a method traded": {
			head: with(t, base, "connection.yaml", "methods: [GET, HEAD]", "methods: [GET, POST]"),
			want: VerdictChanged,
		},
		"another key injected": {
			head: with(t, base, "connection.yaml", `value: "Bearer {{ .token }}"`, `value: "Bearer {{ .other }}"`),
			want: VerdictWidened,
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := Compare(renderSide(t, "base", base), renderSide(t, "head", tc.head))
			if len(r.Sandboxes) != 1 {
				t.Fatalf("sandboxes = %+v", r.Sandboxes)
			}
			s := r.Sandboxes[0]
			if s.Verdict != tc.want {
				t.Errorf("verdict %s, want %s: %+v", s.Verdict, tc.want, s.Access)
			}
			checkAccess(t, &renderSide(t, "base", base).Sandboxes[0].Proxy, &renderSide(t, "head", tc.head).Sandboxes[0].Proxy, s.Access)
		})
	}
}
