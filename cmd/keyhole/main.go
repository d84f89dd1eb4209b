// Command keyhole checks and renders the outbound credentials of sandboxed
// agents, and runs the egress proxy that enforces them.
package main

import (
	"os"

	"keyhole.dev/keyhole/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
