#!/usr/bin/env bash
# Builds versitygw, an S3 gateway that verifies SigV4 signatures, upstream's
# own main package, from tools/versitygw (a separate Go module, so it never
# becomes a dependency of keyhole) into ${KEYHOLE_CACHE:-<repo>/.cache}/bin/
# and prints that directory on stdout; everything else goes to stderr. Like
# scripts/flux.sh, it skips the build when the binary is there and was built
# from the same go.mod, go.sum and Go toolchain (a stamp file records their
# hash). proxy/e2e's AWS SigV4 test runs it with a posix backend.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$repo/tools/versitygw"
cache=${KEYHOLE_CACHE:-$repo/.cache}
dir="$cache/bin"
stamp="$dir/versitygw.stamp"

want=$(cd "$mod" && { cat go.mod go.sum; go version; } | sha256sum | cut -d' ' -f1)
if [ -x "$dir/versitygw" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$dir"
  exit 0
fi

echo "versitygw.sh: building versitygw into $dir (a few minutes on 2 idle cores from a cold build cache)" >&2
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.versitygw.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
(
  cd "$mod"
  # -mod=mod only here: the tools module may record sums the main module
  # never needs.
  CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -ldflags "-s -w" -o "$tmp/versitygw" github.com/versity/versitygw/cmd/versitygw
)
mv -f "$tmp/versitygw" "$dir/versitygw"
echo "$want" >"$stamp"
echo "versitygw.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
