#!/usr/bin/env bash
# Builds kubernetes-sigs/agent-sandbox's controller
# (sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller, the version
# tools/agent-sandbox requires, the one whose CRDs keyhole carries in
# schema/agentsandbox/) from the Go module proxy into
# ${KEYHOLE_CACHE:-<repo>/.cache}/bin/agent-sandbox-controller and prints
# its path on stdout; everything else goes to stderr. Like
# scripts/kube-apiserver.sh it skips the build when the binary is there and
# was built from the same go.mod, go.sum and Go toolchain (a stamp file
# beside it records their hash). Quiet unless something fails.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$repo/tools/agent-sandbox"
cache=${KEYHOLE_CACHE:-$repo/.cache}
bin="$cache/bin/agent-sandbox-controller"
stamp="$bin.stamp"

want=$(cd "$mod" && { cat go.mod go.sum tools.go; go version; } | sha256sum | cut -d' ' -f1)
if [ -x "$bin" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "$bin"
  exit 0
fi

echo "agent-sandbox-controller.sh: building agent-sandbox's controller into $bin (a few minutes on 2 cores)" >&2
mkdir -p "$(dirname "$bin")"
tmp=$(mktemp -d "$(dirname "$bin")/.agent-sandbox.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
start=$(date +%s)
(
  cd "$mod"
  # -mod=mod only here: the tools module may record sums the main module
  # never needs, and this never touches the main module's go.mod.
  GOFLAGS="-mod=mod -buildvcs=false" go build -trimpath -ldflags "-s -w" \
    -o "$tmp/agent-sandbox-controller" sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller
)
mv -f "$tmp/agent-sandbox-controller" "$bin"
echo "$want" >"$stamp"
echo "agent-sandbox-controller.sh: built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
