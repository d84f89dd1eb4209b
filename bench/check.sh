#!/usr/bin/env bash
# Measures `keyhole check` against the floor of merely parsing the same
# YAML into nodes, side by side in one run, and `keyhole render --stdout`
# against check, at 1,000 and 10,000 Connections with a tenth as many
# agents, without and with 3 kustomize overlays of a 100-Connection base;
# and the peak RSS of the keyhole binary checking each repository. Prints
# medians of COUNT runs and their ratios.
#
#   bench/check.sh [COUNT]     # COUNT runs of each benchmark, default 5
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# keyhole is built as the release and the images build it
# (.github/workflows/release.yml, scripts/images.sh): static, without cgo.
# With cgo, kustomize's plugin loader links Go's plugin package, and the
# linker then exports every symbol and keeps every method: 55 MB instead
# of 33, and 37 MiB resident before any work instead of 17
# (docs/benchmarks.md, "The binary as released").
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/keyhole" ./cmd/keyhole
go test -c -o "$tmp/cli.test" ./cli

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf '%-8s %8s %10s %10s %7s %11s %9s %10s %7s\n' conns overlays parse_ms check_ms ratio ms_per_obj peak_rss render_ms r/check
for ov in 0 3; do
for n in 1000 10000; do
  # One parse, check and render per invocation, COUNT invocations: the
  # three alternate, so a load that changes during the run falls on all
  # of them alike (-test.count would run every parse, then every check).
  out=
  for _ in $(seq "$count"); do
    out+=$(KEYHOLE_BENCH_N=$n KEYHOLE_BENCH_OVERLAYS=$ov "$tmp/cli.test" -test.run '^$' -test.bench 'CheckVsParse/(parse|check|render)$' -test.benchtime 1x)$'\n'
  done
  parse=$(awk '/CheckVsParse\/parse/ {print $3/1e6}' <<<"$out" | median)
  check=$(awk '/CheckVsParse\/check/ {print $3/1e6}' <<<"$out" | median)
  render=$(awk '/CheckVsParse\/render/ {print $3/1e6}' <<<"$out" | median)
  repo="$tmp/repo-$n-$ov"
  go run ./bench/gen -n "$n" -agents $((n / 10)) -overlays "$ov" -o "$repo" >/dev/null
  objs=$("$tmp/keyhole" check "$repo" | awk '/objects checked/ {print $3}')
  rss=$( { /usr/bin/time -f '%M' "$tmp/keyhole" check "$repo" >/dev/null; } 2>&1 | tail -1)
  printf '%-8s %8s %10.1f %10.1f %7.2f %11.3f %6d MB %10.1f %7.2f\n' "$n" "$ov" "$parse" "$check" \
    "$(awk -v a="$check" -v b="$parse" 'BEGIN {print a/b}')" \
    "$(awk -v a="$check" -v o="$objs" 'BEGIN {print a/o}')" $((rss / 1024)) \
    "$render" "$(awk -v a="$render" -v b="$check" 'BEGIN {print a/b}')"
done
done
