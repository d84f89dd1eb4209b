#!/usr/bin/env bash
# Runs `cue vet` and `keyhole check` side by side on the same generated
# repositories, cue vet validating every document keyhole validates against
# keyhole's own CUE definitions (`keyhole schema --cue`): each document of a
# kind against the definition of its kind, each agent.yaml against #Agent.
# Prints, for each, the median of COUNT runs of the wall time, the CPU time
# (user and system) and the peak RSS, and keyhole's ratios to cue vet's.
#
# cue vet is run two ways, both picking the definition by the document's
# kind:
#   cue-disj  -d '#AnyKind': a disjunction of the five kinds' definitions,
#             the way one writes "one of these" in CUE;
#   cue-kind  -d '#ByKind': the definition looked up by the document's own
#             kind field, no disjunction.
# cue vet checks shapes only; keyhole check also checks references, Secret
# keys, templates and bindings.
#
# cue vet reads a YAML stream one document at a time, each against the
# definition -d names. The repository's files are split into two halves of
# about the same size, one cue process each, run in parallel on the two
# cores; each process vets its half of the files with documents of a kind
# (-d '#AnyKind' or '#ByKind'), then its half of the agent.yaml files (-d
# '#Agent'): four cue invocations a run, two at a time. cue's CPU is the
# sum of the four; its peak RSS is the sum of the two processes' peaks, the
# most both could hold at once. A cue run that takes longer than
# CUE_TIMEOUT seconds (default 600) is stopped and reported as such.
#
#   bench/cue.sh [COUNT] [N...]   # default 5 runs, N = 1000 10000 Connections
#
# cue is built once from the cuelang.org/go version keyhole's go.mod names
# into $KEYHOLE_CACHE/bin (default .cache/bin); it is not a dependency of
# keyhole's module.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-5}
shift || true
sizes=(1000 10000)
if [ $# -gt 0 ]; then sizes=("$@"); fi
limit=${CUE_TIMEOUT:-600}
version=$(go list -m -f '{{.Version}}' cuelang.org/go)
cache=${KEYHOLE_CACHE:-$PWD/.cache}
cue=$cache/bin/cue-$version-static
if [ ! -x "$cue" ]; then
  mkdir -p "$cache/bin"
  tmpbin=$(mktemp -d)
  # Static and with trimmed paths, as keyhole is built below.
  CGO_ENABLED=0 GOBIN=$tmpbin go install -trimpath "cuelang.org/go/cmd/cue@$version"
  mv "$tmpbin/cue" "$cue"
  rmdir "$tmpbin"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# keyhole is built as the release and the images build it
# (.github/workflows/release.yml, scripts/images.sh): static, without cgo
# (docs/benchmarks.md, "The binary as released").
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/keyhole" ./cmd/keyhole

# The definitions are keyhole's own, as `keyhole schema --cue` prints
# them; pick.cue adds only the two ways of choosing one by kind.
mkdir "$tmp/cue"
"$tmp/keyhole" schema --cue >"$tmp/cue/schema.cue"
cat >"$tmp/cue/pick.cue" <<'EOF'
package schema

// #AnyKind is a document of any kind keyhole validates: the disjunction
// of their definitions, which the kind field alone tells apart.
#AnyKind: #Connection | #Secret | #SandboxClass | #AgentRuntime | #ToolRegistry

// #ByKind is the definition of the document's own kind.
#ByKind: {
	kind!: string
	#kinds[kind]
}

#kinds: {
	Connection:   #Connection
	Secret:       #Secret
	SandboxClass: #SandboxClass
	AgentRuntime: #AgentRuntime
	ToolRegistry: #ToolRegistry
}
EOF
defs=("$tmp/cue/schema.cue" "$tmp/cue/pick.cue")

# Self-check: cue vet must fail on broken documents, in a stream and in an
# agent.yaml, with each way of picking, and pass their valid versions;
# otherwise the comparison would be against a vet that checks nothing.
mkdir -p "$tmp/self/agents/a"
cat >"$tmp/self/good.yaml" <<'EOF'
apiVersion: omnia.altairalabs.ai/v1alpha1
kind: Connection
metadata: {name: c1, namespace: team}
spec:
  hosts: [api.example.com]
  credential: {kind: secret, secretRef: {name: s1}}
  placement:
    inject:
      - {hosts: [api.example.com], header: Authorization, value: "Bearer {{ .token }}"}
---
apiVersion: v1
kind: Secret
metadata: {name: s1, namespace: team}
stringData: {token: t}
EOF
printf 'name: a\nmode: text\nllm: fast\n' >"$tmp/self/agents/a/agent.yaml"
declare -A broken=(
  [host]='s/hosts: \[api.example.com\]$/hosts: [API.example.com]/'
  [field]='s/^metadata: {name: s1, /metadata: {name: s1, nmespace: x, /'
  [required]='/credential:/d'
  [kind]='s/^kind: Secret/kind: Secrets/'
)
for pick in AnyKind ByKind; do
  if ! "$cue" vet -d "#$pick" "${defs[@]}" "$tmp/self/good.yaml" >"$tmp/out" 2>&1; then
    echo "cue vet -d '#$pick' rejects a valid stream:" >&2
    cat "$tmp/out" >&2
    exit 1
  fi
  for b in "${!broken[@]}"; do
    sed "${broken[$b]}" "$tmp/self/good.yaml" >"$tmp/self/bad.yaml"
    if cmp -s "$tmp/self/good.yaml" "$tmp/self/bad.yaml"; then
      echo "self-check $b: the edit changed nothing" >&2
      exit 1
    fi
    if "$cue" vet -d "#$pick" "${defs[@]}" "$tmp/self/bad.yaml" >/dev/null 2>&1; then
      echo "cue vet -d '#$pick' accepts a stream with a broken document ($b)" >&2
      exit 1
    fi
  done
done
"$cue" vet -d '#Agent' "${defs[@]}" "$tmp/self/agents/a/agent.yaml"
printf 'name: a\nmode: txt\nllm: fast\n' >"$tmp/self/agents/a/agent.yaml"
if "$cue" vet -d '#Agent' "${defs[@]}" "$tmp/self/agents/a/agent.yaml" >/dev/null 2>&1; then
  echo "cue vet -d '#Agent' accepts an agent.yaml with mode: txt" >&2
  exit 1
fi
echo "self-check: cue vet $version rejects a bad host, an unknown field, a missing required field and an unknown kind in a stream (-d '#AnyKind', -d '#ByKind') and a bad mode in an agent.yaml (-d '#Agent'), and passes their valid versions"

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# halves FILE...: writes the files, split into two lists of about the same
# total size (largest first, each to the lighter list), to $tmp/half-0 and
# $tmp/half-1, NUL-separated.
halves() {
  local -a w=(0 0)
  : >"$tmp/half-0"
  : >"$tmp/half-1"
  while read -r size f; do
    local i=0
    if [ "${w[1]}" -lt "${w[0]}" ]; then i=1; fi
    w[i]=$((w[i] + size))
    printf '%s\0' "$f" >>"$tmp/half-$i"
  done < <(stat -c '%s %n' "$@" | sort -rn)
}

# vetter PICK: writes $tmp/vet-PICK, which runs the two cue processes in
# parallel, each under /usr/bin/time, and fails if either does.
vetter() {
  cat >"$tmp/vet-$1" <<EOF
#!/usr/bin/env bash
pids=()
for i in 0 1; do
  /usr/bin/time -o "$tmp/time-\$i" -f '%M' bash -c '
    xargs -0 -a "$tmp/docs-\$1" timeout $limit "$cue" vet -d "#$1" ${defs[*]} &&
    xargs -0 -a "$tmp/agents-\$1" timeout $limit "$cue" vet -d "#Agent" ${defs[*]}' _ "\$i" &
  pids+=(\$!)
done
rc=0
for p in "\${pids[@]}"; do wait "\$p" || rc=\$?; done
exit \$rc
EOF
  chmod +x "$tmp/vet-$1"
}
vetter AnyKind
vetter ByKind

# once CMD...: one run of CMD, as a line: wall, cpu (user and system), rss
# (MiB). For a cue run the RSS is the sum of its two processes' peaks. A
# run that fails stops the benchmark: every tool must pass every document.
once() {
  if ! /usr/bin/time -o "$tmp/time" -f '%e %U %S %M' "$@" >"$tmp/out" 2>&1; then
    echo "failed: $* (a cue invocation over ${limit}s, CUE_TIMEOUT, is stopped and fails too)" >&2
    tail -20 "$tmp/out" >&2
    tail -1 "$tmp/time" >&2
    exit 1
  fi
  local rss
  rss=$(tail -1 "$tmp/time" | awk '{print $4}')
  case $1 in "$tmp"/vet-*) rss=$(cat "$tmp/time-0" "$tmp/time-1" | awk '{s += $1} END {print s}') ;; esac
  tail -1 "$tmp/time" | awk -v rss="$rss" '{printf "%s %.2f %.1f\n", $1, $2+$3, rss/1024}'
}

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s %-12s %8s %8s %9s\n' conns tool wall_s cpu_s rss_MiB
for n in "${sizes[@]}"; do
  repo="$tmp/repo-$n"
  go run ./bench/gen -n "$n" -agents $((n / 10)) -o "$repo" >/dev/null
  # keyhole.yaml is keyhole's own settings (kind Config), not a document
  # with a definition; every other file holds documents of a kind, or is
  # an agent.yaml.
  mapfile -t docs < <(find "$repo" -name '*.yaml' ! -name agent.yaml ! -path "$repo/keyhole.yaml" | sort)
  mapfile -t agents < <(find "$repo" -name agent.yaml | sort)
  halves "${docs[@]}"
  mv "$tmp/half-0" "$tmp/docs-0"
  mv "$tmp/half-1" "$tmp/docs-1"
  halves "${agents[@]}"
  mv "$tmp/half-0" "$tmp/agents-0"
  mv "$tmp/half-1" "$tmp/agents-1"
  # The three alternate, run by run, so that all see the same machine.
  declare -A rows=()
  tools=(cue-disj cue-kind keyhole)
  for _ in $(seq "$count"); do
    rows[cue-disj]+=$(once "$tmp/vet-AnyKind")$'\n'
    rows[cue-kind]+=$(once "$tmp/vet-ByKind")$'\n'
    rows[keyhole]+=$(once "$tmp/keyhole" check "$repo")$'\n'
  done
  declare -A med=()
  for t in "${tools[@]}"; do
    for col in 1 2 3; do
      med[$t$col]=$(awk -v c="$col" 'NF {print $c}' <<<"${rows[$t]}" | median)
    done
    printf '%-8s %-12s %8.2f %8.2f %9.1f\n' "$n" "$t" "${med[${t}1]}" "${med[${t}2]}" "${med[${t}3]}"
  done
  for t in cue-disj cue-kind; do
    printf '%-8s %-12s %8.3f %8.3f %9.2f\n' "$n" "keyhole/${t#cue-}" \
      "$(awk -v a="${med[keyhole1]}" -v b="${med[${t}1]}" 'BEGIN {print a/b}')" \
      "$(awk -v a="${med[keyhole2]}" -v b="${med[${t}2]}" 'BEGIN {print a/b}')" \
      "$(awk -v a="${med[keyhole3]}" -v b="${med[${t}3]}" 'BEGIN {print a/b}')"
  done
  echo "         ${#docs[@]} files of documents, ${#agents[@]} agent.yaml; load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
  unset med rows
done
