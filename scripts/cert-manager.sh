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

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$repo/tools/cert-manager"
cache=${KEYHOLE_CACHE:-$repo/.cache}
dir="$cache/bin"
bin="$dir/cert-manager-controller"
stamp="$dir/cert-manager.stamp"

want=$(cd "$mod" && { cat go.mod go.sum main.go; go version; } | sha256sum | cut -d' ' -f1)
if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$dir"
  exit 0
fi

echo "cert-manager.sh: building cert-manager's controller into $bin (several minutes on 2 cores from a cold build cache)" >&2
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.cert-manager.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
(
  cd "$mod"
  # As upstream builds its controller: static, -trimpath. -mod=mod only
  # here: the tools module may record sums the main module never needs.
  CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -ldflags "-s -w" -o "$tmp/cert-manager-controller" .
)
mv -f "$tmp/cert-manager-controller" "$bin"
echo "$want" >"$stamp"
echo "cert-manager.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
