#!/usr/bin/env bash
# What installing keyhole costs the GitHub Action and the pre-commit hook:
# the source build the Action's install step runs (cold: an empty build
# cache, as on a runner without one; warm: the same build again), against
# scripts/download-keyhole.sh fetching and verifying a release archive of
# that binary from a loopback server (a fake release: the archive as the
# release workflow packs it, and its checksums.txt). The module cache is
# this machine's in both, so no figure includes downloading modules.
# Usage: bench/install.sh [DOWNLOADS]  (default 5; prints medians)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-5}
tmp=$(mktemp -d)
server=
cleanup() {
  [ -z "$server" ] || kill "$server" 2> /dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

version=v0.0.0-bench
ldflags=$(KEYHOLE_VERSION=$version scripts/version-ldflags.sh)
build() { CGO_ENABLED=0 GOFLAGS=-mod=mod GOPROXY=off GOCACHE="$1" go build -trimpath -ldflags "$ldflags" -o "$2" ./cmd/keyhole; }
start=$(now)
build "$tmp/gocache" "$tmp/keyhole"
cold=$(secs "$start" "$(now)")
start=$(now)
build "$tmp/gocache" "$tmp/keyhole"
warm=$(secs "$start" "$(now)")

os=$(go env GOOS) arch=$(go env GOARCH)
name="keyhole_${version}_${os}_${arch}"
mkdir -p "$tmp/release/$version" "$tmp/pack/$name"
cp "$tmp/keyhole" README.md "$tmp/pack/$name/"
tar -C "$tmp/pack" -czf "$tmp/release/$version/$name.tar.gz" "$name"
(cd "$tmp/release/$version" && sha256sum -- *.tar.gz > checksums.txt)
python3 -c '
import http.server, socketserver, sys, os
os.chdir(sys.argv[1])
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a): pass
s = socketserver.TCPServer(("127.0.0.1", 0), Quiet)
print(s.server_address[1], flush=True)
s.serve_forever()' "$tmp/release" > "$tmp/port" &
server=$!
for _ in $(seq 50); do [ -s "$tmp/port" ] && break; sleep 0.1; done
port=$(cat "$tmp/port")
for i in $(seq "$runs"); do
  start=$(now)
  KEYHOLE_RELEASES="http://127.0.0.1:$port" scripts/download-keyhole.sh "$version" "$tmp/bin$i" 2> /dev/null
  secs "$start" "$(now)"
  echo
done > "$tmp/downloads"
download=$(median < "$tmp/downloads")
size=$(wc -c < "$tmp/release/$version/$name.tar.gz")
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "source build, cold cache: ${cold} s"
echo "source build, warm cache: ${warm} s"
echo "verified download from loopback (${size} bytes), median of $runs: ${download} s"
