#!/usr/bin/env bash
# Builds versitygw, an S3 gateway that verifies SigV4 signatures, upstream's
# own main package, from tools/versitygw (a separate Go module, so it never
# becomes a dependency of keyhole) into ${KEYHOLE_CACHE:-<repo>/.cache}/bin/
# and prints that directory on stdout; everything else goes to stderr. Like
# scripts/flux.sh, it skips the build when the binary is there and was built
# from the same go.mod, go.sum and Go toolchain (a stamp file records their
# hash). proxy/e2e's AWS SigV4 test runs it with a posix backend.
set -euo pipefail

# shellcheck source=scripts/lib/build-tool.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/build-tool.sh"
mod="$repo/tools/versitygw"
stamp="$dir/versitygw.stamp"

want=$(tool_want "" go.mod go.sum)
tool_skip_current "$dir" "$stamp" "$want" versitygw

echo "versitygw.sh: building versitygw into $dir (a few minutes on 2 idle cores from a cold build cache)" >&2
tool_begin versitygw
CGO_ENABLED=0 tool_go_build -ldflags "-s -w" -o "$tmp/versitygw" github.com/versity/versitygw/cmd/versitygw
tool_done versitygw.sh "$stamp" "$want" "$dir" versitygw
