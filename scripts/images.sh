#!/usr/bin/env bash
# Builds keyhole's container images without a container engine: static
# binaries of ./cmd/keyhole-proxy and ./cmd/keyhole, each made into an image
# by tools/images (go-containerregistry as a library, a separate Go module)
# with the Mozilla roots, a non-root user and OCI labels naming this
# commit. Writes ${KEYHOLE_CACHE:-.cache}/images/keyhole-proxy.tar and
# keyhole.tar, image tarballs that `ctr -n k8s.io images import`,
# `docker load` and `crane push` take, and prints their paths. Then
# keyhole-netinit.tar, the sidecar pod's transparent-mode init image:
# Debian's iptables package (a root filesystem made by mmdebstrap from
# Debian's packages, no container engine) plus the keyhole-proxy binary,
# whose transparent-init command writes the rules iptables-restore loads.
# The root filesystem is kept while its package list is unchanged.
#
#   IMAGE_REGISTRY  repository prefix (default ghcr.io/keyhole-dev)
#   IMAGE_TAG       tag (default v0.1.0, render's default proxy image)
#   IMAGE_ARCH      GOARCH of the binaries and images (default: go env GOARCH)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
cache=${KEYHOLE_CACHE:-$repo/.cache}
out="$cache/images"
registry=${IMAGE_REGISTRY:-ghcr.io/keyhole-dev}
tag=${IMAGE_TAG:-v0.1.0}
arch=${IMAGE_ARCH:-$(go env GOARCH)}

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
created=$(git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
created=$(date -u -d "$created" +%Y-%m-%dT%H:%M:%SZ)

mkdir -p "$out/bin"
tool="$out/bin/images-tool"
go -C tools/images build -trimpath -o "$tool" .

for cmd in keyhole-proxy keyhole; do
  bin="$out/bin/$arch/$cmd"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -buildvcs=auto -ldflags "-s -w" -o "$bin" "./cmd/$cmd"
  "$tool" binary -binary "$bin" -ref "$registry/$cmd:$tag" -out "$out/$cmd.tar" \
    -revision "$revision" -version "$tag" -created "$created" -arch "$arch" >&2
  echo "$out/$cmd.tar"
done

# The transparent-mode init image. Debian's iptables (nf_tables backend)
# is the reference implementation of the rules' syntax; the essential
# variant adds only what dpkg itself needs.
if ! command -v mmdebstrap >/dev/null 2>&1; then
  echo "images.sh: mmdebstrap is missing (apt-get install -y mmdebstrap): it builds the keyhole-netinit root filesystem" >&2
  exit 1
fi
suite=bookworm
mirror=${KEYHOLE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
rootfs="$out/netinit-rootfs-$arch.tar"
stamp="$rootfs.stamp"
opts=(--quiet --variant=essential --include=iptables --architectures="$arch" --format=tar --skip=output/dev
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*')
want=$(echo "$suite ${opts[*]}" | sha256sum | cut -d' ' -f1)
if [ ! -s "$rootfs" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "images.sh: building the keyhole-netinit root filesystem (Debian $suite, iptables)" >&2
  mmdebstrap "${opts[@]}" "$suite" "$rootfs.tmp" "$mirror" >&2
  mv -f "$rootfs.tmp" "$rootfs"
  echo "$want" >"$stamp"
fi
"$tool" rootfs -rootfs "$rootfs" -binary "$out/bin/$arch/keyhole-proxy" -ref "$registry/keyhole-netinit:$tag" \
  -out "$out/keyhole-netinit.tar" -revision "$revision" -version "$tag" -created "$created" -arch "$arch" >&2
echo "$out/keyhole-netinit.tar"
