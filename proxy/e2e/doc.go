//go:build e2e

// Package e2e holds the egress proxy's end-to-end tests: the keyhole-proxy
// binary is built once, run as a subprocess on loopback ports, and driven by
// the real clients a sandbox uses (curl, git, Python requests, gh) against
// local TLS upstreams and a real git http-backend. The tests only run with
// the e2e build tag (go test -tags e2e ./...) because they need those tools
// installed; a missing tool fails the test and names its Debian package.
package e2e
