package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"keyhole.dev/keyhole/compiler"
	"keyhole.dev/keyhole/proxy"
	"keyhole.dev/keyhole/proxy/config"
	"keyhole.dev/keyhole/render"
)

func runExplain(e *env, args []string) int {
	fs := newFlags(e, "explain", "[flags] [PATH...]")
	var f checkFlags
	f.registerInputs(fs)
	sandbox := fs.String("sandbox", "", "the sandbox (claim) `NAME` or NAMESPACE/NAME to explain; without it, list the sandboxes")
	request := fs.String("request", "", "judge one request, `'METHOD URL'`, e.g. 'GET https://api.github.com/user', as the proxy would")
	body := fs.String("body", "", "the request's `JSON` body, for rules that look at it (e.g. a Git LFS batch request)")
	mode := fs.String("proxy-mode", render.ModeSidecar, "the proxy mode the sandbox is rendered with (`sidecar` or deployment), for what it enforces")
	paths, err := parse(fs, args)
	if err != nil {
		return flagExit(err)
	}
	f.format = "text"
	modeLines, err := render.DescribeMode(*mode)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole explain: --proxy-mode: %v\n", err)
		return exitUsage
	}
	p, code, ok := plan(e, paths, &f)
	if !ok {
		return code
	}
	if *sandbox == "" {
		if *request != "" {
			fmt.Fprintln(e.stderr, "keyhole explain: --request needs --sandbox")
			return exitUsage
		}
		for _, s := range p.Sandboxes {
			fmt.Fprintf(e.stdout, "%s\t%s %s\n", sandboxName(s), s.Source.Kind, s.Source.Name)
		}
		return exitOK
	}
	s, err := findSandbox(p, *sandbox)
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole explain: %v\n", err)
		return exitUsage
	}
	if *request == "" {
		describeSandbox(e.stdout, s, modeLines)
		describeRuntimes(e.stdout, *mode)
		return exitOK
	}
	d, err := judge(s.Proxy, *request, []byte(*body))
	if err != nil {
		fmt.Fprintf(e.stderr, "keyhole explain: %v\n", err)
		return exitUsage
	}
	printDecision(e.stdout, s, d)
	return exitOK
}

func sandboxName(s compiler.Sandbox) string {
	if s.Namespace == "" {
		return s.Name
	}
	return s.Namespace + "/" + s.Name
}

func findSandbox(p compiler.Plan, name string) (compiler.Sandbox, error) {
	var names []string
	var found []compiler.Sandbox
	for _, s := range p.Sandboxes {
		names = append(names, sandboxName(s))
		if s.Name == name || sandboxName(s) == name {
			found = append(found, s)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return compiler.Sandbox{}, fmt.Errorf("%w: no sandbox %q (the input has: %s)", errUsage, name, strings.Join(names, ", "))
	}
	return compiler.Sandbox{}, fmt.Errorf("%w: %q names several sandboxes; give NAMESPACE/NAME", errUsage, name)
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
		return fmt.Sprintf("replaces %s in request headers with Secret %s key %s", in.Substitute.Placeholder, in.Secret, in.Substitute.Key)
	}
	return "none"
}

func rule(r config.Rule) string {
	paths := slices.Concat(r.PathPrefixes, r.PathPatterns)
	s := strings.Join(r.Methods, ",") + " " + strings.Join(paths, " ")
	if len(r.Body) > 0 {
		keys := make([]string, 0, len(r.Body))
		for k := range r.Body {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var conds []string
		for _, k := range keys {
			conds = append(conds, fmt.Sprintf("%s in [%s]", k, strings.Join(r.Body[k], ",")))
		}
		s += " with JSON body " + strings.Join(conds, ", ")
	}
	return s
}

// judge decides a request as the proxy would, with the proxy's own
// decision function: the CONNECT (or the plain http:// request) first,
// then the request inside the tunnel.
func judge(cfg config.Config, request string, body []byte) (proxy.Decision, error) {
	method, raw, ok := strings.Cut(strings.TrimSpace(request), " ")
	raw = strings.TrimSpace(raw)
	if !ok || method == "" || !strings.Contains(raw, "://") {
		return proxy.Decision{}, fmt.Errorf("%w: --request %q: want 'METHOD URL' with an absolute http:// or https:// URL", errUsage, request)
	}
	policy, err := proxy.NewPolicy(&cfg)
	if err != nil {
		return proxy.Decision{}, err
	}
	return policy.DecideURL(method, raw, body), nil
}

func printDecision(w io.Writer, s compiler.Sandbox, d proxy.Decision) {
	switch d.Action {
	case proxy.ActionRefuse:
		fmt.Fprintf(w, "refused: %d %s: %s\n", d.Reason.Status(), d.Reason, d.Message)
		fmt.Fprintf(w, "the sandbox sees: %s: %s\n", proxy.RefusedHeader, d.Reason)
	case proxy.ActionInject:
		for _, h := range s.Proxy.Hosts {
			if h.Name == d.Host {
				fmt.Fprintf(w, "allowed: forwarded to %s over verified TLS; the proxy %s (connection %s)\n", d.Host, injection(h.Inject), d.Connection)
				return
			}
		}
		fmt.Fprintf(w, "allowed: forwarded to %s with the credential injected\n", d.Host)
	case proxy.ActionTunnel:
		fmt.Fprintf(w, "allowed: %s is a passthrough host; the request is tunnelled untouched, without a credential\n", d.Host)
	case proxy.ActionForward:
		fmt.Fprintf(w, "allowed: forwarded to %s as plain HTTP, without a credential\n", d.Host)
	default:
		fmt.Fprintf(w, "%s: %s %s\n", d.Action, d.Reason, d.Message)
	}
}
