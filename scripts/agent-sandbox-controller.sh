#!/usr/bin/env bash
# Builds kubernetes-sigs/agent-sandbox's controller
# (sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller, the version
# tools/agent-sandbox requires, the one whose CRDs keyhole carries in
# schema/agentsandbox/) from the Go module proxy into
# ${KEYHOLE_CACHE:-<repo>/.cache}/bin/agent-sandbox-controller and prints
# its path on stdout; everything else goes to stderr. Like
# scripts/kube-apiserver.sh it skips the build when the binary is there and
# was built from the same go.mod, go.sum and Go toolchain (a stamp file
# beside it records their hash). Quiet unless something fails.
set -euo pipefail

# shellcheck source=scripts/lib/build-tool.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/build-tool.sh"
mod="$repo/tools/agent-sandbox"
bin="$dir/agent-sandbox-controller"
stamp="$bin.stamp"

want=$(tool_want "" go.mod go.sum tools.go)
tool_skip_current "$bin" "$stamp" "$want" agent-sandbox-controller

echo "agent-sandbox-controller.sh: building agent-sandbox's controller into $bin (a few minutes on 2 cores)" >&2
tool_begin agent-sandbox
tool_go_build -ldflags "-s -w" -o "$tmp/agent-sandbox-controller" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
tool_done agent-sandbox-controller.sh "$stamp" "$want" "$bin" agent-sandbox-controller
