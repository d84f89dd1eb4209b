package cli

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/diag"
	"keyhole.dev/keyhole/diff"
	"keyhole.dev/keyhole/pipeline"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/proxy/policy"
	"keyhole.dev/keyhole/render"
)

// explainHelp follows explain's flags in its -h.
const explainHelp = `Without --sandbox, lists the sandboxes the inputs define, one a line on
stdout (none: a note on stderr, exit 0). With --sandbox,
prints what that sandbox may reach: its placeholders, the injected hosts
with their credential (by Secret key name, never a value) and rules, and
the passthrough hosts. With --request, judges one request as the proxy
would, with the proxy's own decision function.

Exit status: 0 listed, described or allowed; 1 the request is refused;
2 a usage error, unreadable input, or inputs whose check finds errors.
`

func runExplain(e *env, args []string) int {
	fs := newFlags(e, "explain", "[flags] [PATH...]")
	helpAfterUsage(fs, e.stderr, explainHelp)
	var f checkFlags
	f.registerInputs(fs)
	f.noImages = true // what a sandbox may reach does not depend on its image
	sandbox := fs.String("sandbox", "", "the sandbox (claim) `NAME` or NAMESPACE/NAME to explain; without it, list the sandboxes")
	unit := registerUnit(fs)
	request := fs.String("request", "", "judge one request, `'METHOD URL'`, e.g. 'GET https://api.github.com/user', as the proxy would")
	body := fs.String("body", "", "the request's `JSON` body, for rules that look at it (e.g. a Git LFS batch request)")
	base := fs.String("base", "", "compare with the inputs at git `REF`: the sandbox's access verdict and witnesses, as keyhole diff gives them, and --request decided on both sides")
	head := fs.String("head", "", "with --base, the git `REF` to compare to; the working tree on disk when omitted")
	mode := fs.String("proxy-mode", render.ModeSidecar, "the proxy mode the sandbox is rendered with (`sidecar` or deployment), for what it enforces")
	format := fs.String("format", "text", "output: `text` or json (one JSON object on stdout, for scripts and policy engines; docs/diff.md has its shape)")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	f.format = "text"
	// A request's verdict names the rule that made it, where its
	// Connection writes it.
	f.objects = *request != "" && *base == ""
	if *format != "text" && *format != "json" {
		fmt.Fprintf(e.stderr, "keyhole explain: unknown format %q (want text or json)\n", *format)
		return exitUsage
	}
	asJSON := *format == "json"
	modeLines, err := render.DescribeMode(*mode)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole explain: --proxy-mode: %s\n", errText(err))
		return exitUsage
	}
	if *base != "" {
		return explainChange(e, paths, &f, *base, *head, *unit, *sandbox, *request, []byte(*body), asJSON)
	}
	if *head != "" {
		fmt.Fprintln(e.stderr, "keyhole explain: --head needs --base")
		return exitUsage
	}
	units, code, ok := plan(e, "explain", paths, &f)
	if !ok {
		return code
	}
	units, err = selectUnit(units, *unit)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole explain: %s\n", errText(err))
		return exitUsage
	}
	if *sandbox == "" {
		if *request != "" {
			fmt.Fprintln(e.stderr, "keyhole explain: --request needs --sandbox")
			return exitUsage
		}
		if asJSON {
			list := explainListJSON{Sandboxes: []explainSandboxJSON{}}
			for _, u := range units {
				for _, s := range u.Plan.Sandboxes {
					list.Sandboxes = append(list.Sandboxes, sandboxJSON(s, pipeline.UnitName(u.Name), *mode))
				}
			}
			if err := writeJSON(e.stdout, list); err != nil {
				return fail(e, "explain", err)
			}
			return exitOK
		}
		if !slices.ContainsFunc(units, func(u compiler.Unit) bool { return len(u.Plan.Sandboxes) > 0 }) {
			fmt.Fprintln(e.stderr, "keyhole explain: no deploy unit has a sandbox: nothing to explain (a sandbox comes from an AgentRuntime or ToolRegistry with spec.sandbox, or an agent.yaml with sandbox)")
			return exitOK
		}
		for _, u := range units {
			for _, s := range u.Plan.Sandboxes {
				if len(units) > 1 {
					fmt.Fprintf(e.stdout, "%s\t%s %s\tunit %s\n", sandboxName(s), s.Source.Kind, s.Source.Name, diag.EscapeControl(pipeline.UnitName(u.Name)))
					continue
				}
				fmt.Fprintf(e.stdout, "%s\t%s %s\n", sandboxName(s), s.Source.Kind, s.Source.Name)
			}
		}
		return exitOK
	}
	s, err := findSandbox(units, *sandbox)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole explain: %s\n", errText(err))
		return exitUsage
	}
	if asJSON {
		one := explainOneJSON{Sandbox: sandboxJSON(s, "", *mode)}
		var d policy.Decision
		if *request != "" {
			if d, err = judge(s.Proxy, *request, []byte(*body)); err != nil {
				fmt.Fprintf(e.stderr, "keyhole explain: %s\n", errText(err))
				return exitUsage
			}
			one.Request, one.Decision = *request, decisionJSON(s, d)
		}
		if err := writeJSON(e.stdout, one); err != nil {
			return fail(e, "explain", err)
		}
		if *request != "" && d.Action == policy.ActionRefuse {
			return exitFailed
		}
		return exitOK
	}
	if *request == "" {
		describeSandbox(e.stdout, s, modeLines)
		describeRuntimes(e.stdout, *mode)
		return exitOK
	}
	d, err := judge(s.Proxy, *request, []byte(*body))
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole explain: %s\n", errText(err))
		return exitUsage
	}
	printDecision(e.stdout, s, d)
	if _, raw, _ := strings.Cut(strings.TrimSpace(*request), " "); d.Action == policy.ActionInject && !d.WebSocket && strings.HasPrefix(strings.ToLower(strings.TrimSpace(raw)), "wss://") {
		fmt.Fprintln(e.stdout, "websocket: no rule with websocket: true allows this request, so the handshake goes out as a plain GET, without its Upgrade")
	}
	printRuleSource(e.stdout, units, s, d, *request, []byte(*body))
	if d.Action == policy.ActionRefuse {
		return exitFailed
	}
	return exitOK
}

func sandboxName(s compiler.Sandbox) string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "/" + s.Name
}

// selectUnit keeps the deploy unit --unit names; every unit when it
// names none.
func selectUnit(units []compiler.Unit, name string) ([]compiler.Unit, error) {
	if name == "" {
		return units, nil
	}
	var names []string
	for _, u := range units {
		names = append(names, pipeline.UnitName(u.Name))
		if u.Name == name || pipeline.UnitName(u.Name) == name {
			return []compiler.Unit{u}, nil
		}
	}
	return nil, fmt.Errorf("%w: --unit %q: the input has no such deploy unit (it has: %s)", errUsage, name, strings.Join(names, ", "))
}

// findSandbox finds a sandbox by name in the units. The same sandbox in
// several units (two overlays of one base) is one answer when what it may
// reach is the same in each; otherwise --unit must choose.
func findSandbox(units []compiler.Unit, name string) (compiler.Sandbox, error) {
	var names []string
	var found []compiler.Sandbox
	var in []string
	for _, u := range units {
		for _, s := range u.Plan.Sandboxes {
			if !slices.Contains(names, sandboxName(s)) {
				names = append(names, sandboxName(s))
			}
			if s.Name == name || sandboxName(s) == name {
				found = append(found, s)
				in = append(in, pipeline.UnitName(u.Name))
			}
		}
	}
	if len(found) == 0 {
		has := "has none"
		if len(names) > 0 {
			has = "has: " + strings.Join(names, ", ")
		}
		return compiler.Sandbox{}, fmt.Errorf("%w: no sandbox %q (the input %s)", errUsage, name, has)
	}
	for _, s := range found[1:] {
		if sandboxName(s) != sandboxName(found[0]) {
			return compiler.Sandbox{}, fmt.Errorf("%w: %q names several sandboxes; give NAMESPACE/NAME", errUsage, name)
		}
		if !reflect.DeepEqual(s.Proxy, found[0].Proxy) || !reflect.DeepEqual(s.Env, found[0].Env) {
			return compiler.Sandbox{}, fmt.Errorf("%w: sandbox %q differs between deploy units %s; choose one with --unit", errUsage, name, strings.Join(in, ", "))
		}
	}
	return found[0], nil
}

// describeSandbox prints what a sandbox may reach: per host the injection
// by Secret key name (never a value), the rules and the placeholders.
func describeSandbox(w io.Writer, s compiler.Sandbox, modeLines []string) {
	fmt.Fprintf(w, "sandbox %s (%s %s, class %s)\n", sandboxName(s), s.Source.Kind, s.Source.Name, s.Class)
	fmt.Fprintln(w)
	for _, l := range modeLines {
		fmt.Fprintln(w, l)
	}
	if len(s.Env) > 0 {
		fmt.Fprintln(w, "\nplaceholders in the sandbox's environment:")
		for _, v := range s.Env {
			fmt.Fprintf(w, "  %s=%s\n", v.Name, v.Value)
		}
	}
	fmt.Fprintln(w, "\ninjected hosts (HTTPS only; the proxy terminates TLS with the sandbox CA):")
	if len(s.Proxy.Hosts) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, h := range s.Proxy.Hosts {
		fmt.Fprintf(w, "  %s  (connection %s)\n", h.Name, h.Connection)
		if h.Audit {
			fmt.Fprintln(w, "    AUDIT MODE: a request no rule allows is forwarded without the credential and logged, not refused")
		}
		fmt.Fprintf(w, "    credential: %s\n", injection(h.Inject))
		if form, ok := s.ClientForms[h.Name]; ok {
			fmt.Fprintf(w, "    clients send: %s\n", form)
		}
		if len(h.Rules) == 0 {
			fmt.Fprintln(w, "    rules: none, every method and path is forwarded")
			continue
		}
		fmt.Fprintln(w, "    rules (a request must match one):")
		for _, r := range h.Rules {
			fmt.Fprintf(w, "      %s\n", rule(r))
		}
		for _, r := range h.Rules {
			if r.Inject != nil {
				fmt.Fprintln(w, "    a request a rule marked (injects ...) allows takes that credential instead")
				break
			}
		}
	}
	fmt.Fprintln(w, "\npassthrough hosts (tunnelled untouched, no credential):")
	if len(s.Proxy.Passthrough) == 0 {
		fmt.Fprintln(w, "  none")
	}
	for _, h := range s.Proxy.Passthrough {
		fmt.Fprintf(w, "  %s\n", h)
	}
	fmt.Fprintln(w, "\nevery other host is refused: X-Omnia-Egress-Refused: host-not-allowed")
}

// describeRuntimes lists the client runtimes the rendered environment
// covers and how, and what the mode does with one that ignores
// HTTPS_PROXY.
func describeRuntimes(w io.Writer, mode string) {
	fmt.Fprintln(w, "\nruntimes the rendered environment covers (docs/render.md):")
	for _, r := range render.Runtimes() {
		how := r.Via
		if !r.Proxy {
			if mode == render.ModeDeployment {
				how += "; refused here: the NetworkPolicy lets the pod reach only the proxy"
			} else {
				how += "; carried by the transparent listener"
			}
		}
		fmt.Fprintf(w, "  %s: %s\n", r.Name, how)
	}
}

func injection(in config.Inject) string {
	switch {
	case in.Header != nil:
		return fmt.Sprintf("sets %s to %q from Secret %s", in.Header.Name, in.Header.Value, in.Secret)
	case in.Basic != nil:
		return fmt.Sprintf("sets Authorization: Basic from Secret %s keys %s (user) and %s (password)", in.Secret, in.Basic.UsernameKey, in.Basic.PasswordKey)
	case in.Substitute != nil:
		return fmt.Sprintf("replaces %s in request header %s with Secret %s key %s", in.Substitute.Placeholder, strings.Join(in.Substitute.HeaderNames(), ", "), in.Secret, in.Substitute.Key)
	case in.GitHubApp != nil:
		g := in.GitHubApp
		how := "Authorization: token"
		if g.Scheme == config.GitHubSchemeBasic {
			how = "Authorization: Basic x-access-token"
		}
		return fmt.Sprintf("sets %s to a token of GitHub App %d, installation %s, minted by the proxy from Secret %s key %s, scoped to %s", how, g.AppID, g.Installation(), in.Secret, g.PrivateKeyKey, g.Scope())
	case in.AWSSigV4 != nil && in.AWSSigV4.Identity == config.IdentityWorkload:
		a := in.AWSSigV4
		return fmt.Sprintf("signs the request (AWS SigV4, Authorization: AWS4-HMAC-SHA256) for service %s in region %s with the temporary credentials of the proxy's own AWS identity (IRSA or EKS Pod Identity; no Secret), replacing the sandbox's signature", a.Service, a.Region)
	case in.AWSSigV4 != nil:
		a := in.AWSSigV4
		return fmt.Sprintf("signs the request (AWS SigV4, Authorization: AWS4-HMAC-SHA256) for service %s in region %s with the access key in Secret %s (keys %s and %s), replacing the sandbox's signature", a.Service, a.Region, in.Secret, a.AccessKeyIDKey, a.SecretAccessKeyKey)
	case in.OAuth2 != nil:
		o := in.OAuth2
		return fmt.Sprintf("sets Authorization: Bearer to an OAuth 2.0 token the proxy obtains from %s by the %s grant with Secret %s, asking for %s", o.TokenURL, o.Grant, in.Secret, o.Scope())
	case in.Google != nil && in.Google.Identity == config.IdentityWorkload:
		return fmt.Sprintf("sets Authorization: Bearer to %s of the proxy's own identity, from its pod's metadata server (GKE workload identity; no Secret)", googleWhat(in.Google))
	case in.Google != nil:
		g := in.Google
		return fmt.Sprintf("sets Authorization: Bearer to %s the proxy mints with the service account key in Secret %s key %s from %s", googleWhat(g), in.Secret, g.KeyKey, g.TokenURL)
	}
	return "none"
}

// googleWhat says which Google token an injection mints.
func googleWhat(g *config.GoogleInject) string {
	if g.Audience != "" {
		return "an ID token for audience " + g.Audience
	}
	return "an access token with scopes " + strings.Join(g.Scopes, " ")
}

func rule(r config.Rule) string {
	return diff.DescribeRule(r)
}

// judge decides a request as the proxy would, with the proxy's own
// decision function: the CONNECT (or the plain http:// request) first,
// then the request inside the tunnel.
func judge(cfg config.Config, request string, body []byte) (policy.Decision, error) {
	method, raw, ok := strings.Cut(strings.TrimSpace(request), " ")
	raw = strings.TrimSpace(raw)
	if !ok || method == "" || !strings.Contains(raw, "://") {
		return policy.Decision{}, fmt.Errorf("%w: --request %q: want 'METHOD URL' with an absolute http://, https:// or wss:// URL", errUsage, request)
	}
	pol, err := policy.NewPolicy(&cfg)
	if err != nil {
		return policy.Decision{}, err
	}
	return pol.DecideURL(method, raw, body), nil
}

// webSocketLine says what becomes of a WebSocket handshake the proxy
// upgrades.
func webSocketLine(w io.Writer, d policy.Decision) {
	if d.WebSocket {
		fmt.Fprintln(w, "websocket: the upstream is asked to upgrade; the proxy relays the frames, each message from the upstream scrubbed of the credential")
	}
}

func printDecision(w io.Writer, s compiler.Sandbox, d policy.Decision) {
	switch d.Action {
	case policy.ActionRefuse:
		fmt.Fprintf(w, "refused: %d %s: %s\n", d.Reason.Status(), d.Reason, d.Message)
		fmt.Fprintf(w, "the sandbox sees: %s: %s\n", policy.RefusedHeader, d.Reason)
	case policy.ActionInject:
		// The host as the rule that allowed the request injects it:
		// a host's rules may split its credential's forms.
		if hp := d.HostPolicy(); hp != nil {
			fmt.Fprintf(w, "allowed: forwarded to %s over verified TLS; the proxy %s (connection %s)\n", d.Host, injection(hp.Inject), d.Connection)
			webSocketLine(w, d)
			return
		}
		fmt.Fprintf(w, "allowed: forwarded to %s with the credential injected\n", d.Host)
	case policy.ActionTunnel:
		fmt.Fprintf(w, "allowed: %s is a passthrough host; the request is tunnelled untouched, without a credential\n", d.Host)
	case policy.ActionForward:
		fmt.Fprintf(w, "allowed: forwarded to %s as plain HTTP, without a credential\n", d.Host)
	case policy.ActionAudit:
		fmt.Fprintf(w, "audit mode: forwarded to %s WITHOUT the credential; enforced, it would be refused: %d %s: %s\n", d.Host, d.Reason.Status(), d.Reason, d.Message)
		fmt.Fprintf(w, "connection %s is in audit mode (spec.enforcement: audit): the proxy logs this request with the rule that would allow it: %s\n", d.Connection, d.WouldAllow)
	default:
		fmt.Fprintf(w, "%s: %s %s\n", d.Action, d.Reason, d.Message)
	}
}

// explainChange answers for one sandbox what keyhole diff answers for all:
// the access verdict between two git refs, the witnesses that prove it,
// and with --request the decision of each side on that request. Without
// --sandbox it lists every sandbox with its verdict.
func explainChange(e *env, paths []string, f *checkFlags, base, head, unit, sandbox, request string, body []byte, asJSON bool) int {
	if request != "" && sandbox == "" {
		fmt.Fprintln(e.stderr, "keyhole explain: --request needs --sandbox")
		return exitUsage
	}
	if slices.Contains(paths, "-") {
		fmt.Fprintln(e.stderr, "keyhole explain: with --base the inputs come from git refs and the working tree, not from standard input (-)")
		return exitUsage
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	wd, err := os.Getwd()
	if err != nil {
		return fail(e, "explain", err)
	}
	ps, err := pipeline.OpenSides(wd, base, head, paths)
	if err != nil {
		return fail(e, "explain", err)
	}
	defer pipeline.CloseSides(ps)
	sides := diffSides(ps)
	renderer, err := render.ForTarget(render.TargetKubernetes)
	if err != nil {
		return fail(e, "explain", err)
	}
	var opts render.Options
	// The sides share what the same inputs give, as in
	// keyhole diff (see pipeline.Reuse).
	var r *pipeline.Reuse
	if !e.diffAfresh {
		r = cmp.Or(e.diffReuse, pipeline.NewReuse())
	}
	for _, s := range sides {
		s.ok = true
		if len(s.Paths) > 0 {
			s.code, s.ok = s.render(&env{stdout: &s.stderr, stderr: &s.stderr}, wd, f, "text", opts, renderer, r)
		}
		if _, err := e.stderr.Write(s.stderr.Bytes()); err != nil {
			return exitUsage
		}
		if !s.ok {
			return s.code
		}
	}
	// A sandbox as the list names it, NAMESPACE/NAME (unit UNIT), names
	// its unit too.
	if name, u, ok := strings.Cut(strings.TrimSuffix(sandbox, ")"), " (unit "); ok && strings.HasSuffix(sandbox, ")") {
		if unit != "" && unit != u {
			fmt.Fprintf(e.stderr, "keyhole explain: --sandbox %q names unit %s, and --unit %s\n", sandbox, u, unit)
			return exitUsage
		}
		sandbox, unit = name, u
	}
	// Each deploy unit is compared on its own, as keyhole diff compares it.
	names := pipeline.SideUnits(ps, unit)
	if unit != "" && len(names) == 0 {
		fmt.Fprintf(e.stderr, "keyhole explain: --unit %q: neither side has such a deploy unit (they have: %s)\n", unit, strings.Join(sideUnitNames(ps), ", "))
		return exitUsage
	}
	var results []diff.Result
	var sideLists [2][]diff.Side
	for _, name := range names {
		// Units are named as diff names them, whichever --unit keeps.
		several := len(pipeline.SideUnits(ps, "")) > 1
		bs, hs := sides[0].DiffSide(opts, name, several), sides[1].DiffSide(opts, name, several)
		sideLists[0], sideLists[1] = append(sideLists[0], bs), append(sideLists[1], hs)
		results = append(results, diff.Compare(bs, hs))
	}
	res := diff.Merge(results...)
	if len(results) == 0 {
		res = diff.Compare(diff.Side{Ref: sides[0].Ref}, diff.Side{Ref: sides[1].Ref})
	}
	changes := map[string]diff.SandboxChange{}
	for _, c := range res.Sandboxes {
		changes[c.ID()] = c
	}
	if sandbox == "" {
		names := map[string]bool{}
		for _, list := range sideLists {
			for _, p := range list {
				for _, sb := range p.Sandboxes {
					names[p.SandboxID(sb)] = true
				}
			}
		}
		for _, c := range res.Sandboxes {
			names[c.ID()] = true
		}
		list := explainChangeListJSON{Base: res.Base, Head: res.Head, Sandboxes: []explainVerdictJSON{}}
		for _, n := range slices.Sorted(maps.Keys(names)) {
			v := diff.VerdictUnchanged
			if c, ok := changes[n]; ok {
				v = c.Verdict
			}
			if asJSON {
				list.Sandboxes = append(list.Sandboxes, explainVerdictJSON{Sandbox: n, Verdict: v})
				continue
			}
			fmt.Fprintf(e.stdout, "%s\t%s\n", n, v)
		}
		if asJSON {
			if err := writeJSON(e.stdout, list); err != nil {
				return fail(e, "explain", err)
			}
		}
		return exitOK
	}
	// The sandbox in each unit that has it on either side: two overlays
	// of one base give it twice, and their verdicts may differ.
	type hit struct {
		unit int
		sb   [2]*compiler.Sandbox
	}
	var hits []hit
	for u := range names {
		h := hit{unit: u}
		for i := range sideLists {
			matched := map[string]compiler.Sandbox{}
			for _, s := range sideLists[i][u].Sandboxes {
				if s.Name == sandbox || sandboxName(s) == sandbox {
					matched[sandboxName(s)] = s
				}
			}
			if len(matched) > 1 {
				fmt.Fprintf(e.stderr, "keyhole explain: %q names several sandboxes; give NAMESPACE/NAME\n", sandbox)
				return exitUsage
			}
			for _, s := range matched {
				h.sb[i] = &s
			}
		}
		if h.sb[0] != nil || h.sb[1] != nil {
			hits = append(hits, h)
		}
	}
	if len(hits) == 0 {
		var all []compiler.Sandbox
		for _, list := range sideLists {
			for _, p := range list {
				all = append(all, p.Sandboxes...)
			}
		}
		_, err := findSandbox([]compiler.Unit{{Plan: compiler.Plan{Sandboxes: all}}}, sandbox)
		fmt.Fprintf(e.stderr, "keyhole explain: %v\n", err)
		return exitUsage
	}
	change := func(h hit) diff.SandboxChange {
		side, sb := sideLists[1][h.unit], h.sb[1]
		if sb == nil {
			side, sb = sideLists[0][h.unit], h.sb[0]
		}
		id := side.SandboxID(*sb)
		c, ok := changes[id]
		if !ok {
			c = diff.SandboxChange{Namespace: side.SandboxNamespace(*sb), Name: sb.Name, Unit: side.Unit}
		}
		return c
	}
	if len(hits) > 1 {
		// One answer for several units only when it is the answer for
		// each: the same sandbox on each side, and the same verdict.
		same := true
		for _, h := range hits[1:] {
			for i := range h.sb {
				a, b := hits[0].sb[i], h.sb[i]
				if (a == nil) != (b == nil) || a != nil && (!reflect.DeepEqual(a.Proxy, b.Proxy) || !reflect.DeepEqual(a.Env, b.Env)) {
					same = false
				}
			}
			if cmp.Or(change(h).Verdict, diff.VerdictUnchanged) != cmp.Or(change(hits[0]).Verdict, diff.VerdictUnchanged) {
				same = false
			}
		}
		if !same {
			var each []string
			for _, h := range hits {
				each = append(each, fmt.Sprintf("%s %s", pipeline.UnitName(names[h.unit]), cmp.Or(change(h).Verdict, diff.VerdictUnchanged)))
			}
			fmt.Fprintf(e.stderr, "keyhole explain: sandbox %q differs between deploy units (%s); choose one with --unit\n", sandbox, strings.Join(each, ", "))
			return exitUsage
		}
	}
	found := hits[0].sb
	c := change(hits[0])
	if len(hits) > 1 {
		c.Unit = "" // the answer of every unit that has it
	}
	if c.Verdict == "" {
		c.Verdict = diff.VerdictUnchanged
	}
	if asJSON {
		out := explainChangeJSON{Base: res.Base, Head: res.Head, Sandbox: c}
		if request != "" {
			out.Request, out.Decision = request, &explainSidesJSON{}
			for i, side := range []**explainDecisionJSON{&out.Decision.Base, &out.Decision.Head} {
				if found[i] == nil {
					continue
				}
				d, err := judge(found[i].Proxy, request, body)
				if err != nil {
					fmt.Fprintf(e.stderr, "keyhole explain: %s\n", errText(err))
					return exitUsage
				}
				*side = decisionJSON(*found[i], d)
			}
		}
		if err := writeJSON(e.stdout, out); err != nil {
			return fail(e, "explain", err)
		}
		return exitOK
	}
	if err := diff.WriteSandbox(e.stdout, res.Base, res.Head, c); err != nil {
		return fail(e, "explain", err)
	}
	if request == "" {
		return exitOK
	}
	fmt.Fprintln(e.stdout)
	for i, ref := range []diff.Ref{res.Base, res.Head} {
		which := []string{"base", "head"}[i]
		if found[i] == nil {
			fmt.Fprintf(e.stdout, "%s %s: refused: the sandbox does not exist there\n", which, ref)
			continue
		}
		d, err := judge(found[i].Proxy, request, body)
		if err != nil {
			fmt.Fprintf(e.stderr, "keyhole explain: %s\n", errText(err))
			return exitUsage
		}
		var b strings.Builder
		printDecision(&b, *found[i], d)
		fmt.Fprintf(e.stdout, "%s %s: %s", which, ref, b.String())
	}
	return exitOK
}

// sideUnitNames lists the deploy units of either side as check names them.
func sideUnitNames(ps []*pipeline.Side) []string {
	var out []string
	for _, n := range pipeline.SideUnits(ps, "") {
		out = append(out, pipeline.UnitName(n))
	}
	return out
}
