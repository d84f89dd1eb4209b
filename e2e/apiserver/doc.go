//go:build e2e

// Package apiserver checks every keyhole render against a real
// kube-apiserver. TestMain starts etcd and a kube-apiserver (built from
// upstream sources by scripts/kube-apiserver.sh) on loopback ports, installs
// the omnia operator's CRDs, keyhole's beside them, and cert-manager's, and
// the tests then server-side apply
// each rendered example with strict field validation and read every object
// back with kubectl. The pinned OpenAPI schemas in render/testdata catch
// most mistakes hermetically; this catches what only the server's own
// validation, defaulting and admission see. It runs only with the e2e
// build tag; a missing binary, etcd or kubectl fails it with the fix.
// See docs/e2e.md.
package apiserver
