#!/usr/bin/env bash
# Checks that a refactor changed no output: builds keyhole at a git ref and
# from the working tree, runs check (text, -v and json), render --stdout (both
# proxy modes), render -o (the tree it writes compared too), explain and diff
# --base REF~20 on every directory given (the
# bundled examples, the checks fixtures and the corpus repositories when none
# is), and compares what the two binaries print and their exit codes. Prints
# each difference and exits 1 if there is any.
#
#   bench/same-output.sh REF [DIR...]     # e.g. bench/same-output.sh main
#   KEYHOLE_SAME_GEN=10000 bench/same-output.sh main   # adds a generated repository of N Connections
#   KEYHOLE_SAME_CORPUS=/work/.mirror bench/same-output.sh main   # adds the corpus (bench/corpus.sh's
#                                     check --format json, as published and with each setup, both binaries)
set -euo pipefail
ref=$1; shift
cd "$(dirname "$0")/.."
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$ref" | tar -x -C "$tmp" --one-top-level=old
(cd "$tmp/old" && CGO_ENABLED=0 go build -trimpath -o "$tmp/keyhole-old" ./cmd/keyhole)
CGO_ENABLED=0 go build -trimpath -o "$tmp/keyhole-new" ./cmd/keyhole

dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
  for d in examples/* compiler/testdata/checks/* cli/testdata/repos/*; do
    [ -d "$d" ] && dirs+=("$d")
  done
fi
if [ -n "${KEYHOLE_SAME_GEN:-}" ]; then
  go run ./bench/gen -n "$KEYHOLE_SAME_GEN" -agents $((KEYHOLE_SAME_GEN / 100 + 1)) -o "$tmp/gen" >/dev/null
  dirs+=("$tmp/gen")
fi

runs=(
  "check"
  "check -v"
  "check --format json"
  "render -o $tmp/out --sandbox-image example.com/sandbox:1"
  "render --stdout --sandbox-image example.com/sandbox:1"
  "render --stdout --sandbox-image example.com/sandbox:1 --proxy-mode deployment"
  "explain"
  "diff --base $(git rev-parse "$ref~20") --sandbox-image example.com/sandbox:1"
)
differ=0
for dir in "${dirs[@]}"; do
  for args in "${runs[@]}"; do
    for b in old new; do
      # shellcheck disable=SC2086 # args are words
      (cd "$root" && "$tmp/keyhole-$b" $args "$dir" >"$tmp/$b.out" 2>"$tmp/$b.err"; echo "exit $?" >>"$tmp/$b.err") || true
      # What render -o wrote, moved aside for the other binary's run.
      rm -rf "$tmp/$b.tree"
      if [ -d "$tmp/out" ]; then mv "$tmp/out" "$tmp/$b.tree"; else mkdir "$tmp/$b.tree"; fi
    done
    if ! cmp -s "$tmp/old.out" "$tmp/new.out" || ! cmp -s "$tmp/old.err" "$tmp/new.err" || ! diff -r "$tmp/old.tree" "$tmp/new.tree" >/dev/null; then
      echo "DIFFERS: keyhole $args $dir"
      diff "$tmp/old.out" "$tmp/new.out" | head -5 || true
      diff "$tmp/old.err" "$tmp/new.err" | head -5 || true
      diff -r "$tmp/old.tree" "$tmp/new.tree" | head -5 || true
      differ=1
    fi
  done
done
if [ -n "${KEYHOLE_SAME_CORPUS:-}" ]; then
  # The corpus's repositories, each at its commit: what check says of it
  # as published and with its setup, as bench/corpus.sh keeps it.
  for b in old new; do
    bench/corpus.sh -k "$tmp/keyhole-$b" -r "$tmp/corpus-$b" "$KEYHOLE_SAME_CORPUS" >"$tmp/corpus-$b.md" 2>"$tmp/corpus-$b.log" || true
  done
  if ! diff -r "$tmp/corpus-old" "$tmp/corpus-new" >"$tmp/corpus.diff"; then
    echo "DIFFERS: bench/corpus.sh on $KEYHOLE_SAME_CORPUS"
    head -20 "$tmp/corpus.diff"
    differ=1
  fi
  n=$(find "$tmp/corpus-new" -name '*.json' | wc -l)
  [ "$n" -gt 0 ] || { echo "bench/corpus.sh read no repository of $KEYHOLE_SAME_CORPUS"; differ=1; }
  echo "corpus: $n runs of check compared"
fi
[ "$differ" = 0 ] && echo "same output on ${#dirs[@]} directories, ${#runs[@]} commands each"
exit "$differ"
