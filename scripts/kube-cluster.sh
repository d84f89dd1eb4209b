#!/usr/bin/env bash
# Builds the node and control-plane binaries of the real-cluster end-to-end
# test (kubelet, kube-controller-manager, kube-scheduler, kube-proxy) from
# tools/kube-cluster, a separate Go module, into
# ${KEYHOLE_CACHE:-<repo>/.cache}/bin/ and prints that directory on stdout;
# everything else goes to stderr. Like scripts/kube-apiserver.sh, it skips
# the build when the binaries are there and were built from the same
# go.mod, go.sum, sources and Go toolchain (a stamp file records their
# hash). The module resolves the same versions as tools/kube-apiserver, so
# the two builds share most of Go's build cache.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$repo/tools/kube-cluster"
cache=${KEYHOLE_CACHE:-$repo/.cache}
dir="$cache/bin"
stamp="$dir/kube-cluster.stamp"
cmds=(kubelet kube-controller-manager kube-scheduler kube-proxy)

# Keep in step with scripts/kube-apiserver.sh.
k8s_version=v1.37.2

want=$(cd "$mod" && { cat go.mod go.sum */main.go; go version; echo "$k8s_version"; } | sha256sum | cut -d' ' -f1)
current=true
for c in "${cmds[@]}"; do [ -x "$dir/$c" ] || current=false; done
if $current && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$dir"
  exit 0
fi

echo "kube-cluster.sh: building ${cmds[*]} $k8s_version into $dir (about 10 minutes on 2 cores when the kube-apiserver build cache is warm, more when cold)" >&2
mkdir -p "$dir"
tmp=$(mktemp -d "$dir/.kube-cluster.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
pkg=k8s.io/component-base/version
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
start=$(date +%s)
(
  cd "$mod"
  # -mod=mod only here: the tools module may record sums the main module
  # never needs, and this never touches the main module's go.mod. The same
  # flags and cgo setting as scripts/kube-apiserver.sh, so the packages the
  # two builds share come from Go's build cache (CGO_ENABLED=0 would change
  # every package that imports net, that is nearly all of them).
  GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath \
    -ldflags "-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean" \
    -o "$tmp/" $(printf './%s ' "${cmds[@]}")
)
for c in "${cmds[@]}"; do mv -f "$tmp/$c" "$dir/$c"; done
echo "$want" >"$stamp"
echo "kube-cluster.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$dir"
