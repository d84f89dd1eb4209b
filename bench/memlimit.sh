#!/usr/bin/env bash
# Runs `keyhole check` on a generated repository inside memory cgroups of
# the given limits, as a CI container or a pod would: once as keyhole runs
# by default (its soft memory limit taken from the cgroup's, see
# internal/memlimit) and once with GOMEMLIMIT=off (the Go runtime's own
# default, blind to the cgroup). Prints, per run, the exit code (137: the
# kernel killed it), the cgroup's peak usage, CPU and wall time.
#
#   bench/memlimit.sh N LIMIT_MiB...   # e.g. bench/memlimit.sh 10000 1024 64 48
#
# Needs root and a writable cgroup file system (v1 memory controller, or
# v2 with the memory controller available to a child of this shell's
# cgroup).
set -euo pipefail
cd "$(dirname "$0")/.."
n=$1
shift
tmp=$(mktemp -d)
cgroups=()
cleanup() {
  for c in "${cgroups[@]}"; do rmdir "$c" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# keyhole is built as the release and the images build it
# (.github/workflows/release.yml, scripts/images.sh): static, without cgo.
# With cgo, kustomize's plugin loader links Go's plugin package, and the
# linker then exports every symbol and keeps every method: 55 MB instead
# of 33, and 37 MiB resident before any work instead of 17
# (docs/benchmarks.md, "The binary as released").
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/keyhole" ./cmd/keyhole
go run ./bench/gen -n "$n" -agents $((n / 10)) -o "$tmp/repo" >/dev/null

# The directory of this shell's memory cgroup, and the files of its kind.
if mnt=$(awk '$(NF-2) == "cgroup" && $NF ~ /(^|,)memory(,|$)/ {print $5; exit}' /proc/self/mountinfo) && [ -n "$mnt" ]; then
  parent=$mnt$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)
  limit_file=memory.limit_in_bytes peak_file=memory.max_usage_in_bytes
else
  mnt=$(awk '$(NF-2) == "cgroup2" {print $5; exit}' /proc/self/mountinfo)
  parent=$mnt$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)/keyhole-bench-$$
  mkdir -p "$parent"
  cgroups+=("$parent")
  echo +memory >"$parent/cgroup.subtree_control"
  limit_file=memory.max peak_file=memory.peak
fi

printf '%-9s %-16s %4s %9s %7s %7s\n' limit_MiB run exit peak_MiB cpu_s wall_s
i=0
for lim in "$@"; do
  for mode in default GOMEMLIMIT=off; do
    i=$((i + 1))
    cg=$parent/keyhole-bench-$$-$i
    mkdir "$cg"
    cgroups+=("$cg")
    echo $((lim * 1024 * 1024)) >"$cg/$limit_file"
    envs=()
    [ "$mode" = default ] || envs=("$mode")
    code=0
    env "${envs[@]}" /usr/bin/time -o "$tmp/time" -f '%e %U %S' \
      sh -c 'echo $$ > "$0" && exec "$@"' "$cg/cgroup.procs" "$tmp/keyhole" check "$tmp/repo" >/dev/null 2>&1 || code=$?
    # time(1) is outside the cgroup: a killed keyhole is its child's exit.
    read -r wall user sys < <(tail -1 "$tmp/time" | awk 'NF == 3')  || { wall=- user=0 sys=0; }
    printf '%-9s %-16s %4s %9d %7.2f %7s\n' "$lim" "$mode" "$code" $(($(cat "$cg/$peak_file") / 1048576)) \
      "$(echo "$user + $sys" | bc)" "$wall"
  done
done
