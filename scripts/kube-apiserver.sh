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

# shellcheck source=scripts/lib/build-tool.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/build-tool.sh"
mod="$repo/tools/kube-apiserver"
bin="$dir/kube-apiserver"
stamp="$bin.stamp"

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

want=$(tool_want "$k8s_version" go.mod go.sum main.go)
tool_skip_current "$bin" "$stamp" "$want" kube-apiserver

echo "kube-apiserver.sh: building $k8s_version into $bin (about 10 minutes on 2 cores)" >&2
tool_begin kube-apiserver
buildlog="$bin.log"
if ! tool_go_build -ldflags "$(k8s_ldflags)" -o "$tmp/kube-apiserver" . >"$buildlog" 2>&1; then
  cat "$buildlog" >&2
  exit 1
fi
tool_done kube-apiserver.sh "$stamp" "$want" "$bin" kube-apiserver
