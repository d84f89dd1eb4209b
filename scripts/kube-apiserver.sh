#!/usr/bin/env bash
# Builds a real kube-apiserver from tools/kube-apiserver (a separate Go
# module, so Kubernetes never becomes a dependency of keyhole) into
# ${KEYHOLE_CACHE:-<repo>/.cache}/bin/kube-apiserver and prints its path on
# stdout; everything else goes to stderr. The build takes about ten minutes
# on two idle cores, so it is skipped when the binary is there and was
# built from the same go.mod, go.sum, main.go and Go toolchain (a stamp file
# beside it records their hash). It also installs Debian's etcd-server when
# etcd is missing, because the API server is useless without it.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$repo/tools/kube-apiserver"
cache=${KEYHOLE_CACHE:-$repo/.cache}
bin="$cache/bin/kube-apiserver"
stamp="$bin.stamp"

# The version the binary reports; kubectl refuses a server whose version it
# cannot parse, and the default is a placeholder.
k8s_version=v1.37.2

if ! command -v etcd >/dev/null 2>&1; then
  echo "kube-apiserver.sh: installing etcd-server (etcd is missing)" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq etcd-server >&2
fi

want=$(cd "$mod" && { cat go.mod go.sum main.go; go version; echo "$k8s_version"; } | sha256sum | cut -d' ' -f1)
if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$bin"
  exit 0
fi

echo "kube-apiserver.sh: building $k8s_version into $bin (about 10 minutes on 2 cores)" >&2
mkdir -p "$cache/bin"
tmp="$bin.tmp.$$"
trap 'rm -f "$tmp"' EXIT
pkg=k8s.io/component-base/version
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
start=$(date +%s)
(
  cd "$mod"
  # -mod=mod only here: the tools module may record sums the main module
  # never needs, and this never touches the main module's go.mod.
  GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath \
    -ldflags "-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
    -o "$tmp" .
)
mv -f "$tmp" "$bin"
echo "$want" >"$stamp"
echo "kube-apiserver.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
