#!/usr/bin/env bash
# Compares `keyhole check` of a git ref with the working tree's, side by
# side in one run, on repositories given as directories: median wall time
# and median peak RSS of COUNT runs, alternating the two binaries, and
# their ratios. Both are built as the release builds them (static, no
# cgo).
#
#   bench/repos.sh [-n COUNT] REF DIR...     # e.g. bench/repos.sh HEAD~5 ../home-ops
set -euo pipefail
count=5
if [ "${1:-}" = "-n" ]; then count=$2; shift 2; fi
ref=$1; shift
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$ref" | tar -x -C "$tmp" --one-top-level=old
(cd "$tmp/old" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/keyhole-old" ./cmd/keyhole)
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/keyhole-new" ./cmd/keyhole

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf '%-28s %9s %9s %6s %10s %10s %6s  %s\n' repository old_ms new_ms ratio old_rss_mb new_rss_mb ratio "new summary"
for dir in "$@"; do
  for b in old new; do : >"$tmp/$b.t"; : >"$tmp/$b.m"; done
  for _ in $(seq "$count"); do
    for b in old new; do
      /usr/bin/time -f '%e %M' -o "$tmp/time" "$tmp/keyhole-$b" check "$dir" >"$tmp/$b.out" 2>&1 || true
      read -r s kb < <(tail -n 1 "$tmp/time")
      awk -v s="$s" 'BEGIN {print s*1000}' >>"$tmp/$b.t"
      awk -v k="$kb" 'BEGIN {print k/1024}' >>"$tmp/$b.m"
    done
  done
  ot=$(median <"$tmp/old.t"); nt=$(median <"$tmp/new.t")
  om=$(median <"$tmp/old.m"); nm=$(median <"$tmp/new.m")
  printf '%-28s %9.0f %9.0f %6.2f %10.1f %10.1f %6.2f  %s\n' "$(basename "$dir")" "$ot" "$nt" "$(awk -v a="$nt" -v b="$ot" 'BEGIN {print a/b}')" \
    "$om" "$nm" "$(awk -v a="$nm" -v b="$om" 'BEGIN {print a/b}')" "$(tail -n 1 "$tmp/new.out")"
done
