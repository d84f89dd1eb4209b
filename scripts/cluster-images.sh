#!/usr/bin/env bash
# Builds the two images the real-cluster end-to-end test needs besides the
# release images of scripts/images.sh, and prints their tarballs' paths:
#   pause.tar    keyhole.dev/e2e/pause:1, the pods' sandbox container
#                (tools/images/pause, a static binary)
#   sandbox.tar  keyhole.dev/e2e/sandbox:bookworm, a Debian bookworm root
#                filesystem from Debian's packages (mmdebstrap) with git,
#                curl, Python requests and the CA certificates, which the
#                test tags as the example's sandbox image
# Both land in ${KEYHOLE_CACHE:-.cache}/images/. The root filesystem is
# built once (280 MB) and kept while this script's
# package list is unchanged.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
cache=${KEYHOLE_CACHE:-$repo/.cache}
out="$cache/images"
mkdir -p "$out/bin"
arch=$(go env GOARCH)
tool="$out/bin/images-tool"
go -C tools/images build -trimpath -o "$tool" .

CGO_ENABLED=0 go -C tools/images build -trimpath -ldflags "-s -w" -o "$out/bin/$arch/pause" ./pause
"$tool" binary -binary "$out/bin/$arch/pause" -ref keyhole.dev/e2e/pause:1 -out "$out/pause.tar" -arch "$arch" >&2
echo "$out/pause.tar"

packages=git,curl,python3-requests,ca-certificates
suite=bookworm
mirror=${KEYHOLE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
rootfs="$out/sandbox-rootfs.tar"
stamp="$rootfs.stamp"
opts=(--quiet --variant=minbase --include="$packages" --format=tar --skip=output/dev)
want=$(echo "$suite ${opts[*]}" | sha256sum | cut -d' ' -f1)
if [ ! -s "$rootfs" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  if ! command -v mmdebstrap >/dev/null 2>&1; then
    echo "cluster-images.sh: mmdebstrap is missing: run scripts/cluster-deps.sh" >&2
    exit 1
  fi
  echo "cluster-images.sh: building a Debian $suite root filesystem with $packages (minutes: it downloads about 60 MB of packages)" >&2
  start=$(date +%s)
  mmdebstrap "${opts[@]}" "$suite" "$rootfs.tmp" "$mirror" >&2
  mv -f "$rootfs.tmp" "$rootfs"
  echo "$want" >"$stamp"
  echo "cluster-images.sh: root filesystem built in $(( $(date +%s) - start ))s" >&2
fi
if [ ! -s "$out/sandbox.tar" ] || [ "$out/sandbox.tar" -ot "$rootfs" ] || [ "$out/sandbox.tar" -ot "$tool" ]; then
  "$tool" rootfs -rootfs "$rootfs" -ref keyhole.dev/e2e/sandbox:$suite -cmd sleep -cmd infinity -out "$out/sandbox.tar" -arch "$arch" >&2
fi
echo "$out/sandbox.tar"
