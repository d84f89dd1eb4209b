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

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$repo/tools/kube-router"
cache=${KEYHOLE_CACHE:-$repo/.cache}
dir="$cache/bin"
stamp="$dir/kube-router.stamp"
version=v2.1.0

want=$(cd "$mod" && { cat go.mod go.sum; go version; echo "$version"; } | sha256sum | cut -d' ' -f1)
if [ -x "$dir/kube-router" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$dir"
  exit 0
fi

echo "kube-router.sh: building kube-router $version into $dir (several minutes on 2 cores from a cold build cache)" >&2
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.kube-router.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
(
  cd "$mod"
  # As upstream's Makefile builds it: static, its version stamped.
  CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath \
    -ldflags "-s -w -X github.com/cloudnativelabs/kube-router/v2/pkg/version.Version=$version" \
    -o "$tmp/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
)
mv -f "$tmp/kube-router" "$dir/kube-router"
echo "$want" >"$stamp"
echo "kube-router.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
