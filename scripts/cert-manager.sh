#!/usr/bin/env bash
# Builds cert-manager's controller, the part that issues and renews a
# self-signed Issuer's and a CA Certificate's Secrets (tools/cert-manager,
# a separate Go module whose small main wires the published
# github.com/cert-manager/cert-manager module's controllers as upstream's
# cmd/controller does, so cert-manager never becomes a dependency of
# keyhole), into ${KEYHOLE_CACHE:-<repo>/.cache}/bin/cert-manager-controller
# and prints that directory on stdout; everything else goes to stderr.
# Like scripts/flux.sh, it skips the build when the binary is there and was
# built from the same go.mod, go.sum, main.go and Go toolchain (a stamp
# file records their hash). The real-cluster end-to-end test (e2e/cluster)
# runs it.
set -euo pipefail

# shellcheck source=scripts/lib/build-tool.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/build-tool.sh"
mod="$repo/tools/cert-manager"
bin="$dir/cert-manager-controller"
stamp="$dir/cert-manager.stamp"

want=$(tool_want "" go.mod go.sum main.go)
tool_skip_current "$dir" "$stamp" "$want" cert-manager-controller

echo "cert-manager.sh: building cert-manager's controller into $bin (several minutes on 2 cores from a cold build cache)" >&2
tool_begin cert-manager
# As upstream builds its controller: static, -trimpath.
CGO_ENABLED=0 tool_go_build -ldflags "-s -w" -o "$tmp/cert-manager-controller" .
tool_done cert-manager.sh "$stamp" "$want" "$dir" cert-manager-controller
