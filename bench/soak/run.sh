#!/usr/bin/env bash
# Builds keyhole-proxy and the soak driver, then runs the soak on loopback
# (30 minutes by default) at low priority and prints a Markdown report.
# Extra arguments go to the driver, e.g. bench/soak/run.sh -duration 3m.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
cd "$root"
go build -o "$out/keyhole-proxy" ./cmd/keyhole-proxy
go build -o "$out/soak" ./bench/soak
nice -n 10 "$out/soak" -proxy-bin "$out/keyhole-proxy" "$@"
