#!/usr/bin/env bash
# Runs kubeconform and `keyhole check` side by side on the same generated
# repositories, kubeconform validating every document that has a kind
# against keyhole's own JSON Schema (one file per kind, written by
# bench/kubeconform), with two workers as the machine has two cores.
# Prints, for each, the median of COUNT runs of the wall time, the CPU
# time (user and system) and the peak RSS, and keyhole's ratios to
# kubeconform's.
#
# kubeconform validates shapes only: it cannot read agent.yaml files (they
# carry no kind; it counts them as errors) and checks no reference,
# template, Secret key or binding; keyhole check does all of that too.
#
#   bench/kubeconform.sh [COUNT] [N...]   # default 5 runs, N = 10000 Connections
#
# kubeconform is built once from its Go module into $KEYHOLE_CACHE/bin
# (default .cache/bin); it is not a dependency of keyhole's module.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
shift || true
sizes=("${@:-10000}")
version=v0.7.0
cache=${KEYHOLE_CACHE:-$PWD/.cache}
kc=$cache/bin/kubeconform-$version-static
if [ ! -x "$kc" ]; then
  mkdir -p "$cache/bin"
  tmpbin=$(mktemp -d)
  # As its release builds it (its .goreleaser.yml): static, netgo.
  CGO_ENABLED=0 GOBIN=$tmpbin go install -trimpath -tags netgo "github.com/yannh/kubeconform/cmd/kubeconform@$version"
  mv "$tmpbin/kubeconform" "$kc"
  rmdir "$tmpbin"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# keyhole is built as the release and the images build it
# (.github/workflows/release.yml, scripts/images.sh): static, without cgo.
# With cgo, kustomize's plugin loader links Go's plugin package, and the
# linker then exports every symbol and keeps every method: 55 MB instead
# of 33, and 37 MiB resident before any work instead of 17
# (docs/benchmarks.md, "The binary as released").
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/keyhole" ./cmd/keyhole
go run ./bench/kubeconform -o "$tmp/schemas"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# once CMD...: one run of CMD, as a line: wall, cpu (user and system), rss (MiB).
once() {
  /usr/bin/time -o "$tmp/time" -f '%e %U %S %M' "$@" >/dev/null 2>&1 || true
  tail -1 "$tmp/time" | awk '{printf "%s %.2f %.1f\n", $1, $2+$3, $4/1024}'
}

printf '%-8s %-12s %8s %8s %9s\n' conns tool wall_s cpu_s rss_MiB
for n in "${sizes[@]}"; do
  repo="$tmp/repo-$n"
  go run ./bench/gen -n "$n" -agents $((n / 10)) -o "$repo" >/dev/null
  # The two alternate, run by run, so that both see the same machine.
  kcs= khs=
  for _ in $(seq "$count"); do
    kcs+=$(once "$kc" -n 2 -schema-location "$tmp/schemas/{{ .ResourceKind }}.json" -ignore-missing-schemas -summary "$repo")$'\n'
    khs+=$(once "$tmp/keyhole" check "$repo")$'\n'
  done
  declare -A med=()
  for t in kubeconform keyhole; do
    if [ "$t" = kubeconform ]; then rows=$kcs; else rows=$khs; fi
    for col in 1 2 3; do
      med[$t$col]=$(awk -v c="$col" 'NF {print $c}' <<<"$rows" | median)
    done
    printf '%-8s %-12s %8.2f %8.2f %9.1f\n' "$n" "$t" "${med[${t}1]}" "${med[${t}2]}" "${med[${t}3]}"
  done
  printf '%-8s %-12s %8.2f %8.2f %9.2f\n' "$n" keyhole/kc \
    "$(awk -v a="${med[keyhole1]}" -v b="${med[kubeconform1]}" 'BEGIN {print a/b}')" \
    "$(awk -v a="${med[keyhole2]}" -v b="${med[kubeconform2]}" 'BEGIN {print a/b}')" \
    "$(awk -v a="${med[keyhole3]}" -v b="${med[kubeconform3]}" 'BEGIN {print a/b}')"
  unset med
done
