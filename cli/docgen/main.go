// Command docgen writes the docs generated from code: docs/checks.md,
// from the check table and the renderers' rules. Run it from the
// repository root with `go generate ./cli/docgen`.
package main

//go:generate go run . -root ../..

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"keyhole.dev/keyhole/cli"
)

func main() {
	root := flag.String("root", ".", "the repository's root directory")
	flag.Parse()
	path := filepath.Join(*root, "docs", "checks.md")
	if err := os.WriteFile(path, cli.ChecksDoc(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "docgen:", err)
		os.Exit(1)
	}
}
