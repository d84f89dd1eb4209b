#!/usr/bin/env bash
# Builds a real kube-apiserver from tools/kube-apiserver (a separate Go
# module, so Kubernetes never becomes a dependency of keyhole) into
# ${KEYHOLE_CACHE:-<repo>/.cache}/bin/kube-apiserver and prints its path on
# stdout; everything else goes to stderr. The build takes about ten minutes
# on two idle cores, so it is skipped when the binary is there and was
# built from the same go.mod, go.sum, main.go and Go toolchain (a stamp file
# beside it records their hash). It also installs etcd (the binary from
# Debian's etcd-server, not the service) when it is missing, because the
# API server is useless without it. Quiet unless something fails.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$repo/tools/kube-apiserver"
cache=${KEYHOLE_CACHE:-$repo/.cache}
bin="$cache/bin/kube-apiserver"
stamp="$bin.stamp"

# The version the binary reports; kubectl refuses a server whose version it
# cannot parse, and the default is a placeholder.
k8s_version=v1.37.2

# etcd: the binary of Debian's etcd-server, unpacked into /usr/local/bin
# without installing the package, whose scripts would enable and start a
# system-wide etcd service; the tests start their own.
if ! command -v etcd >/dev/null 2>&1; then
  echo "kube-apiserver.sh: installing the etcd binary (etcd is missing)" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  tmp_etcd=$(mktemp -d)
  chmod 0755 "$tmp_etcd" # apt downloads as _apt
  log="$tmp_etcd/log"
  if ! { $SUDO apt-get update -qq && (cd "$tmp_etcd" && apt-get download -qq etcd-server) \
      && dpkg-deb --fsys-tarfile "$tmp_etcd"/etcd-server_*.deb | tar -x -C "$tmp_etcd" ./usr/bin/etcd \
      && $SUDO install -m 0755 "$tmp_etcd/usr/bin/etcd" /usr/local/bin/etcd; } >"$log" 2>&1; then
    cat "$log" >&2
    echo "kube-apiserver.sh: could not install etcd" >&2
    exit 1
  fi
  rm -rf "$tmp_etcd"
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
buildlog="$bin.log"
if ! (
  cd "$mod"
  # -mod=mod only here: the tools module may record sums the main module
  # never needs, and this never touches the main module's go.mod.
  GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath \
    -ldflags "-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
    -o "$tmp" .
) >"$buildlog" 2>&1; then
  cat "$buildlog" >&2
  exit 1
fi
mv -f "$tmp" "$bin"
echo "$want" >"$stamp"
echo "kube-apiserver.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
