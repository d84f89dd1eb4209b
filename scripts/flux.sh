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

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$repo/tools/flux"
cache=${KEYHOLE_CACHE:-$repo/.cache}
dir="$cache/bin"
stamp="$dir/flux.stamp"
cmds=(source-controller kustomize-controller)
pkgs=(github.com/fluxcd/source-controller github.com/fluxcd/kustomize-controller)

want=$(cd "$mod" && { cat go.mod go.sum; go version; } | sha256sum | cut -d' ' -f1)
current=true
for c in "${cmds[@]}"; do [ -x "$dir/$c" ] || current=false; done
if $current && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$dir"
  exit 0
fi

echo "flux.sh: building ${cmds[*]} into $dir (about 10 minutes on 2 idle cores from a cold build cache)" >&2
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.flux.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
(
  cd "$mod"
  # As upstream's Dockerfiles build them: static, -trimpath. -mod=mod only
  # here: the tools module may record sums the main module never needs.
  CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -ldflags "-s -w" -o "$tmp/" "${pkgs[@]}"
)
for c in "${cmds[@]}"; do mv -f "$tmp/$c" "$dir/$c"; done
echo "$want" >"$stamp"
echo "flux.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
