package cli

import "keyhole.dev/keyhole/proxy/proxycmd"

// runProxy runs the egress proxy: the same code as the keyhole-proxy
// binary, for local runs with the one keyhole command.
func runProxy(e *env, args []string) int {
	return proxycmd.Main(args, e.stdout, e.stderr)
}
