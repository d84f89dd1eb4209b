#!/usr/bin/env bash
# Builds keyhole-proxy and the benchmark driver, then measures keyhole-proxy
# against direct HTTPS and mitmproxy on loopback and prints a Markdown
# table. Needs the Debian package mitmproxy (for mitmdump). Extra
# arguments go to the driver, e.g. bench/proxy/run.sh -runs 3.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/keyhole-proxy" ./cmd/keyhole-proxy
go build -o "$out/proxybench" ./bench/proxy
command -v mitmdump >/dev/null || { echo "mitmdump not found: apt-get install -y mitmproxy" >&2; exit 1; }
"$out/proxybench" -proxy-bin "$out/keyhole-proxy" "$@"
