// Command keyhole-proxy is the runtime egress proxy, built alone for the
// lean image that runs beside each sandbox. All of it lives in
// keyhole.dev/keyhole/proxy/proxycmd.
package main

import (
	"os"

	"keyhole.dev/keyhole/proxy/proxycmd"
)

func main() {
	os.Exit(proxycmd.Main(os.Args[1:], os.Stdout, os.Stderr))
}
