//go:build tools

// Package tools keeps sigs.k8s.io/agent-sandbox required by this module,
// whose only purpose is to build agent-sandbox's controller
// (scripts/agent-sandbox-controller.sh builds
// sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller from it) for
// keyhole's end-to-end tests. It is a separate module so that
// agent-sandbox and controller-runtime never become dependencies of
// keyhole itself.
package tools

import _ "sigs.k8s.io/agent-sandbox/controllers"
