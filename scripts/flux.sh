#!/usr/bin/env bash
# Builds Flux's source-controller and kustomize-controller, upstream's own
# main packages, from tools/flux (a separate Go module, so Flux never
# becomes a dependency of keyhole) into ${KEYHOLE_CACHE:-<repo>/.cache}/bin/
# and prints that directory on stdout; everything else goes to stderr. Like
# scripts/kube-cluster.sh, it skips the build when both binaries are there
# and were built from the same go.mod, go.sum and Go toolchain (a stamp
# file records their hash). The real-cluster end-to-end test (e2e/cluster)
# runs them.
set -euo pipefail

# shellcheck source=scripts/lib/build-tool.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/build-tool.sh"
mod="$repo/tools/flux"
stamp="$dir/flux.stamp"
cmds=(source-controller kustomize-controller)
pkgs=(github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller)

want=$(tool_want "" go.mod go.sum)
tool_skip_current "$dir" "$stamp" "$want" "${cmds[@]}"

echo "flux.sh: building ${cmds[*]} into $dir (about 10 minutes on 2 idle cores from a cold build cache)" >&2
tool_begin flux
# As upstream's Dockerfiles build them: static, -trimpath.
CGO_ENABLED=0 tool_go_build -ldflags "-s -w" -o "$tmp/" "${pkgs[@]}"
tool_done flux.sh "$stamp" "$want" "$dir" "${cmds[@]}"
