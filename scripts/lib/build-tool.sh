# shellcheck shell=bash
# Sourced, not run, by the scripts that build a tool from a separate Go
# module under tools/ (so the tool never becomes a dependency of keyhole)
# into ${KEYHOLE_CACHE:-<repo>/.cache}/bin: kube-apiserver, kube-cluster,
# flux, cert-manager, kube-router, versitygw and agent-sandbox-controller.
# Each skips its build when the binaries are there and a stamp file beside
# them records the hash of what they were built from (the module's go.mod,
# go.sum and sources, the Go toolchain, a version stamped in); prints the
# path of what it built on stdout; and writes everything else to stderr.
#
# It sets repo (the repository's root), cache and dir (the binaries'
# directory), and defines the functions below. The sourcing script sets
# mod, the tools/ module it builds.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${KEYHOLE_CACHE:-$repo/.cache}
dir="$cache/bin"

# k8s_version is the Kubernetes release tools/kube-apiserver and
# tools/kube-cluster build, and that the binaries report: kubectl refuses
# a server whose version it cannot parse, and the default is a
# placeholder.
k8s_version=v1.37.2

# tool_want VERSION FILE...: the hash a build records in its stamp: the
# module's FILEs (paths or globs under $mod), the Go toolchain, and
# VERSION unless it is empty.
tool_want() {
  local version=$1
  shift
  # FILEs may be globs, expanded under $mod; mod is the sourcing script's.
  # shellcheck disable=SC2068,SC2154
  (cd "$mod" && { cat $@; go version; [ -z "$version" ] || echo "$version"; }) | sha256sum | cut -d' ' -f1
}

# tool_skip_current PRINT STAMP WANT BINARY...: when every BINARY (a
# name in $dir) is built and STAMP records WANT, prints PRINT and ends the
# sourcing script: the build is skipped.
tool_skip_current() {
  local print=$1 stamp=$2 want=$3 b
  shift 3
  for b in "$@"; do
    [ -x "$dir/$b" ] || return 0
  done
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "$print"
    exit 0
  fi
}

# tool_begin NAME: makes $dir and a fresh directory in it, tmp, for the
# build to write into (removed on exit), and notes when the build started.
tool_begin() {
  mkdir -p "$dir"
  tmp=$(mktemp -d "$dir/.$1.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  start=$(date +%s)
}

# tool_go_build ARG...: go build -trimpath ARGs in $mod. -mod=mod only
# here: the tools module may record sums the main module never needs, and
# this never touches the main module's go.mod. The caller's CGO_ENABLED
# holds.
tool_go_build() {
  (cd "$mod" && GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath "$@")
}

# k8s_ldflags: the linker flags that stamp k8s_version into a Kubernetes
# binary, as upstream's release builds do.
k8s_ldflags() {
  local pkg=k8s.io/component-base/version major minor
  major=${k8s_version#v}
  major=${major%%.*}
  minor=${k8s_version#v*.}
  minor=${minor%%.*}
  echo "-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
}

# tool_done SCRIPT STAMP WANT PRINT BINARY...: moves each BINARY the build
# wrote into $tmp to $dir, records WANT in STAMP, says how long SCRIPT's
# build took, and prints PRINT.
tool_done() {
  local script=$1 stamp=$2 want=$3 print=$4 b
  shift 4
  for b in "$@"; do
    mv -f "$tmp/$b" "$dir/$b"
  done
  echo "$want" >"$stamp"
  echo "$script: built in $(($(date +%s) - start))s" >&2
  echo "$print"
}
