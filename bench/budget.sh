#!/usr/bin/env bash
# Holds `keyhole check` and `keyhole render -o` to their memory budget
# (docs/benchmarks.md, "The memory budget"): on the repositories `go run
# ./bench/gen -n N -agents N/10` writes, check's peak RSS within 100 MiB at
# 10,000 Connections and within 400 MB at 100,000, and render's within 1.5
# times check's at each, the binary built as released and run at the
# repository's root, as a user runs it. Prints the median of COUNT runs per
# size and command, each run's figure, and exits 1 when a median is over
# its budget. With a REF, that commit's binary runs too, alternating with
# this one, so that both see the same load.
#
#   bench/budget.sh [COUNT] [REF] [N...]   # COUNT runs per size, default 3;
#                                          # sizes N of 10000 and 100000, default both
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-3}
ref=${2:-}
sizes=("${@:3}")
[ ${#sizes[@]} -gt 0 ] || sizes=(10000 100000)
tmp=$(mktemp -d)
cleanup() {
  [ -z "$ref" ] || git worktree remove --force "$tmp/ref" 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# As released (.github/workflows/release.yml): static, without cgo.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/keyhole" ./cmd/keyhole
bins=(keyhole)
if [ -n "$ref" ]; then
  git worktree add --detach "$tmp/ref" "$ref" >/dev/null 2>&1
  (cd "$tmp/ref" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/keyhole-ref" ./cmd/keyhole)
  bins=(keyhole-ref keyhole)
fi

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

over=0
printf '%-8s %-7s %-12s %12s %12s  %s\n' conns command binary peak_MiB budget_MiB runs_MiB
for n in "${sizes[@]}"; do
  case $n in
  10000) budget=100 ;;
  100000) budget=$((400 * 1000 * 1000 / 1048576)) ;;
  *) echo "no budget for $n Connections: 10000 or 100000" >&2; exit 2 ;;
  esac
  go run ./bench/gen -n "$n" -agents $((n / 10)) -o "$tmp/repo-$n" >/dev/null
  declare -A runs=()
  for _ in $(seq "$count"); do
    for b in "${bins[@]}"; do
      for cmd in check render; do
        args=(check)
        [ "$cmd" = render ] && args=(render -o "$tmp/out")
        (cd "$tmp/repo-$n" && /usr/bin/time -o "$tmp/rss" -f '%M' "$tmp/$b" "${args[@]}" >/dev/null 2>&1) || true
        kib=$(tail -1 "$tmp/rss")
        runs[$b.$cmd]+="$((kib / 1024)) "
        rm -rf "$tmp/out"
      done
    done
  done
  for b in "${bins[@]}"; do
    m=$(tr ' ' '\n' <<<"${runs[$b.check]}" | grep . | median)
    for cmd in check render; do
      mc=$(tr ' ' '\n' <<<"${runs[$b.$cmd]}" | grep . | median)
      bc=$budget
      [ "$cmd" = render ] && bc=$(awk -v m="$m" 'BEGIN {print m * 1.5}')
      printf '%-8s %-7s %-12s %12s %12s  %s\n' "$n" "$cmd" "$b" "$mc" "$bc" "${runs[$b.$cmd]}"
      if [ "$b" = keyhole ] && awk -v m="$mc" -v b="$bc" 'BEGIN {exit !(m > b)}'; then
        over=1
      fi
    done
  done
  rm -rf "$tmp/repo-$n"
  unset runs
done
[ "$over" = 0 ] || { echo "over the memory budget" >&2; exit 1; }
