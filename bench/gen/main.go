// Command gen writes a synthetic keyhole repository for benchmarks:
//
//	go run ./bench/gen -n 10000 -agents 100 -o DIR
//
// See package synth for what it writes.
package main

import (
	"os"

	"keyhole.dev/keyhole/bench/gen/synth"
)

func main() {
	os.Exit(synth.Main(os.Args[1:], os.Stdout, os.Stderr))
}
