#!/usr/bin/env bash
# Builds keyhole-proxy and the benchmark driver, then measures keyhole-proxy
# against direct HTTPS and mitmproxy on loopback and prints Markdown
# tables. Needs the Debian package mitmproxy (for mitmdump).
#
#   bench/proxy/run.sh [-ref GITREF] [driver flags...]
#
# -ref GITREF also builds keyhole-proxy as it was at GITREF (from
# git archive, in the temporary directory) and measures it beside the
# current build in every measurement, as "keyhole (GITREF at COMMIT)".
# The other arguments go to the driver, e.g. -runs 3 -stream-duration 5s.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$root"
ref=""
if [[ "${1:-}" == "-ref" ]]; then
	[[ $# -ge 2 ]] || { echo "run.sh: -ref needs a git ref" >&2; exit 2; }
	ref="$2"
	shift 2
fi
command -v mitmdump >/dev/null || { echo "mitmdump not found: apt-get install -y mitmproxy" >&2; exit 1; }
go build -o "$out/keyhole-proxy" ./cmd/keyhole-proxy
go build -o "$out/proxybench" ./bench/proxy
base=()
if [[ -n "$ref" ]]; then
	commit="$(git rev-parse --short "$ref^{commit}")"
	mkdir "$out/base-src"
	git archive "$commit" | tar -x -C "$out/base-src"
	(cd "$out/base-src" && go build -o "$out/keyhole-proxy-base" ./cmd/keyhole-proxy)
	base=(-base-bin "$out/keyhole-proxy-base" -base-label "$ref at $commit")
fi
echo "keyhole-proxy at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' with uncommitted changes')" >&2
"$out/proxybench" -proxy-bin "$out/keyhole-proxy" "${base[@]}" "$@"
