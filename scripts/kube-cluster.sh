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

# shellcheck source=scripts/lib/build-tool.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/build-tool.sh"
mod="$repo/tools/kube-cluster"
stamp="$dir/kube-cluster.stamp"
cmds=(kubelet kube-controller-manager kube-scheduler kube-proxy)

want=$(tool_want "$k8s_version" go.mod go.sum '*/main.go' 'internal/*/*.go')
tool_skip_current "$dir" "$stamp" "$want" "${cmds[@]}"

echo "kube-cluster.sh: building ${cmds[*]} $k8s_version into $dir (about 10 minutes on 2 cores when the kube-apiserver build cache is warm, more when cold)" >&2
tool_begin kube-cluster
# The same flags and cgo setting as scripts/kube-apiserver.sh, so the
# packages the two builds share come from Go's build cache (CGO_ENABLED=0
# would change every package that imports net, that is nearly all of
# them).
tool_go_build -ldflags "$(k8s_ldflags)" -o "$tmp/" "${cmds[@]/#/./}"
tool_done kube-cluster.sh "$stamp" "$want" "$dir" "${cmds[@]}"
