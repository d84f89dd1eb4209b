#!/usr/bin/env bash
# Builds kube-router v2.1.0, upstream's own main package, from
# tools/kube-router (a separate Go module, so kube-router never becomes a
# dependency of keyhole) into ${KEYHOLE_CACHE:-<repo>/.cache}/bin/kube-router
# and prints that directory on stdout; everything else goes to stderr. Like
# scripts/kube-cluster.sh, it skips the build when the binary is there and
# was built from the same go.mod, go.sum and Go toolchain (a stamp file
# records their hash). The real-cluster end-to-end test (e2e/cluster) runs
# only its network policy controller, inside the test's private
# namespaces: security flaws are reported for this release.
set -euo pipefail

# shellcheck source=scripts/lib/build-tool.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/build-tool.sh"
mod="$repo/tools/kube-router"
stamp="$dir/kube-router.stamp"
version=v2.1.0

want=$(tool_want "$version" go.mod go.sum)
tool_skip_current "$dir" "$stamp" "$want" kube-router

echo "kube-router.sh: building kube-router $version into $dir (several minutes on 2 cores from a cold build cache)" >&2
tool_begin kube-router
# As upstream's Makefile builds it: static, its version stamped.
CGO_ENABLED=0 tool_go_build \
  -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$version" \
  -o "$tmp/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
tool_done kube-router.sh "$stamp" "$want" "$dir" kube-router
