#!/usr/bin/env bash
# Runs `keyhole check` on the public GitOps repositories of
# bench/corpus/repos.tsv, each at its pinned commit, as published and then
# with the keyhole files of bench/corpus/setups/<owner>+<name>/ added, and
# prints one table row per repository (docs/corpus.md says what each
# column means). Exit status 1 when a repository as published is not clean,
# a setup's expectations (bench/corpus/setups/*/corpus.expect) fail, or a
# run says one diagnostic more than once.
#
#   bench/corpus.sh [-k KEYHOLE] [-r RESULTS] [-f FLUXCMP] [MIRRORS [OWNER/NAME...]]
#
# MIRRORS holds one git directory per repository, at MIRRORS/<owner>+<name>
# (bare, or a clone whose .git is used), as the fetch of the corpus leaves
# them; the default is /work/.mirror. Nothing is fetched: a repository not
# there is reported absent. Each is cloned (locally: its objects hard-linked
# or copied, not borrowed through objects/info/alternates, which keyhole's
# in-process git reader does not follow) and its commit checked out, so
# keyhole reads a git working tree as in CI, its tags and branches too. -k runs
# the given binary instead of building this tree's; -r keeps each run's
# JSON output and stderr in RESULTS. -f compares, on each repository of
# engine flux or mixed as published, keyhole's reading of every Flux
# unit with Flux's own library (bench/corpus/fluxcmp), writing its table
# to FLUXCMP (and what differs to FLUXCMP.err).
set -uo pipefail
kh="" results="" fluxcmp=""
while getopts k:r:f: opt; do
  case $opt in
  k) kh=$(realpath "$OPTARG") ;;
  r) results=$(realpath -m "$OPTARG") ;;
  f) fluxcmp=$(realpath -m "$OPTARG") ;;
  *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
mirrors=$(realpath -m "${1:-/work/.mirror}")
[ $# -gt 0 ] && shift
only=("$@")
cd "$(dirname "$0")/.." || exit 2
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -z "$kh" ]; then
  go build -o "$tmp/keyhole" ./cmd/keyhole || exit 2
  kh=$tmp/keyhole
fi
[ -n "$results" ] && mkdir -p "$results"
if [ -n "$fluxcmp" ]; then
  go build -o "$tmp/fluxcmp" ./bench/corpus/fluxcmp || exit 2
  : >"$fluxcmp"
  : >"$fluxcmp.err"
fi

# Engine units keyhole says it could not read: out of reach (another
# repository, a chart repository, an OCI artifact), a plugin, a generator
# that reads a cluster. A setup placed under one of them would be unseen.
notread='out of reach|config management plugin|Applications are not checked|inside a Helm chart'

gitdir() {
  local d=$mirrors/${1/\//+}
  for g in "$d/repo/.git" "$d/repo" "$d/.git" "$d"; do
    [ -f "$g/HEAD" ] && [ -d "$g/objects" ] && { echo "$g"; return; }
  done
  return 1
}

# sparse WORK COMMIT: a snapshot may lack its largest blobs (images,
# archives); leave those paths out of the checkout, which would otherwise
# fail, and say so on stderr.
sparse() {
  local absent=()
  git -C "$1" ls-tree -r "$2" | awk -F '\t' '$1 ~ / blob / {split($1, a, " "); print a[3] "\t" $2}' >"$tmp/blobs"
  cut -f1 "$tmp/blobs" | git -C "$1" cat-file --batch-check='%(objectname)' |
    awk '$2 == "missing" {print $1}' >"$tmp/missing"
  mapfile -t absent < <(awk -F '\t' 'NR == FNR {m[$1] = 1; next} $1 in m {print "!/" $2}' "$tmp/missing" "$tmp/blobs")
  [ ${#absent[@]} -eq 0 ] && return 0
  echo "$repo: ${#absent[@]} files absent from the snapshot, left out of the checkout" >&2
  git -C "$1" sparse-checkout set --no-cone '/*' "${absent[@]}"
}

# check DIR NAME: runs keyhole check in DIR, leaves NAME.json, NAME.err and
# sets rc and ms.
check() {
  local start end
  start=$(date +%s%N)
  (cd "$1" && timeout 600 "$kh" check --format json .) >"$tmp/$2.json" 2>"$tmp/$2.err"
  rc=$?
  end=$(date +%s%N)
  ms=$(((end - start) / 1000000))
  if [ -n "$results" ]; then cp "$tmp/$2.json" "$tmp/$2.err" "$results/"; fi
  # What keyhole says of one place it says once: a diagnostic repeated
  # (code, position, message) fails the run.
  local twice
  twice=$(jq '[.diagnostics[] | [.code, .file, .line, .column, .message]] | group_by(.) | map(select(length > 1)) | length' "$tmp/$2.json" 2>/dev/null || echo 0)
  if [ "$twice" != 0 ]; then
    echo "$2: $twice diagnostics said more than once" >&2
    failed=1
  fi
}

# verdict RC NAME: the one-word result of a run.
verdict() {
  if [ "$1" = 124 ]; then echo hang
  elif grep -q '^panic:\|goroutine [0-9]* \[running\]' "$tmp/$2.err"; then echo crash
  elif [ "$1" = 0 ]; then echo clean
  elif [ "$1" = 1 ]; then echo red
  else echo "exit$1"
  fi
}

jcount() { jq -r "$1" "$tmp/$2.json" 2>/dev/null || echo '?'; }

printf '| repository | commit | published | ms | units read | not read | errors | warnings | setup exit | ms | units read | other errors | warnings | seeded found | placed | setup |\n'
printf '|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n'
failed=0 n=0 clean=0 red=0 redok=0 crashed=0 setups=0 setupsok=0
while IFS=$'\t' read -r -u 3 repo commit _ engine expected; do # columns: repository, commit, layout tags, engine, expected
  case $repo in '' | '#'*) continue ;; esac
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $repo "* ]]; then continue; fi
  n=$((n + 1))
  key=${repo/\//+}
  if ! g=$(gitdir "$repo") || ! git --git-dir="$g" cat-file -e "$commit^{commit}" 2>/dev/null; then
    printf '| %s | %.7s | absent |%s\n' "$repo" "$commit" "$(printf ' |%.0s' {1..13})"
    failed=1
    continue
  fi
  work=$tmp/$key
  if ! { git clone -q --no-checkout "$g" "$work" 2>"$tmp/clone.err" &&
    git -C "$work" remote set-url origin "https://github.com/$repo" && # as actions/checkout names it: keyhole tells this repository's repoURLs by it
    sparse "$work" "$commit" &&
    git -C "$work" -c advice.detachedHead=false checkout -q "$commit" 2>>"$tmp/clone.err"; }; then
    printf '| %s | %.7s | unclonable |%s\n' "$repo" "$commit" "$(printf ' |%.0s' {1..13})"
    failed=1
    continue
  fi

  check "$work" "$key.published"
  if [ -n "$fluxcmp" ] && { [ "$engine" = flux ] || [ "$engine" = mixed ]; }; then
    "$tmp/fluxcmp" "$work" 2>>"$fluxcmp.err" | sed "s#| $key |#| $repo |#" | if [ -s "$fluxcmp" ]; then tail -n +3; else cat; fi >>"$fluxcmp"
  fi
  pub=$(verdict "$rc" "$key.published") pms=$ms
  units=$(jcount '.summary.built | length' "$key.published")
  unread=$(jcount "[.diagnostics[] | select(.code == \"InputSkipped\" and (.message | test(\"$notread\")))] | length" "$key.published")
  errs=$(jcount '.summary.errors' "$key.published")
  warns=$(jcount '.summary.warnings' "$key.published")
  case $pub in
  clean) clean=$((clean + 1)) ;;
  red) red=$((red + 1)); [ "${expected:-clean}" = red ] && redok=$((redok + 1)) ;;
  crash | hang) crashed=$((crashed + 1)) ;;
  esac
  [ "$pub" = "${expected:-clean}" ] || failed=1

  sexit="" sms="" sunits="" sother="" swarns="" sfound="" splaced="" sresult=""
  setup=$root/bench/corpus/setups/$key
  if [ -d "$setup" ]; then
    tar -C "$setup" --exclude=./corpus.expect --exclude=./corpus.patch -cf - . | tar -C "$work" -xf -
    if [ -f "$setup/corpus.patch" ] && ! git -C "$work" apply "$setup/corpus.patch"; then
      printf '| %s | %.7s | %s |%s patch does not apply |\n' "$repo" "$commit" "$pub" "$(printf ' |%.0s' {1..12})"
      failed=1
      continue
    fi
    git -C "$work" add -A # tracked, as a pull request's files are; no commit, which absent blobs would refuse
    check "$work" "$key.setup"
    sexit=$rc sms=$ms setups=$((setups + 1))
    sunits=$(jcount '.summary.built | length' "$key.setup")
    swarns=$(jcount '.summary.warnings' "$key.setup")
    want_exit=0 seeded=() known=()
    while read -r word rest; do
      case $word in
      exit) want_exit=$rest ;;
      seeded) seeded+=("$rest") ;;
      known) known+=("$rest") ;;
      esac
    done <"$setup/corpus.expect"
    found=0 placed=0 mine='[]'
    for s in "${seeded[@]}"; do
      read -r code at unit ns <<<"$s"
      file=${at%:*} line=${at##*:}
      sel=".diagnostics | map(select(.code == \"$code\" and .file == \"$file\" and .line == $line))"
      hits=$(jcount "$sel | length" "$key.setup")
      [ "$hits" = 1 ] && found=$((found + 1))
      ok=$(jcount "$sel | map(select((.units | index(\"$unit\")) and (.object.namespace == \"$ns\" or (.message | contains(\" $ns/\"))))) | length" "$key.setup")
      [ "$ok" = 1 ] && placed=$((placed + 1))
      mine=$(jq -c --arg c "$code" --arg f "$file" --argjson l "$line" '. + [{c: $c, f: $f, l: $l}]' <<<"$mine")
    done
    for k in "${known[@]}"; do
      read -r code at _ <<<"$k"
      mine=$(jq -c --arg c "$code" --arg f "${at%:*}" --argjson l "${at##*:}" '. + [{c: $c, f: $f, l: $l}]' <<<"$mine")
    done
    sother=$(jq -r --argjson mine "$mine" '[.diagnostics[] | select(.severity == "error") | select(. as $d | $mine | any(.c == $d.code and .f == $d.file and .l == $d.line) | not)] | length' "$tmp/$key.setup.json" 2>/dev/null || echo '?')
    sfound="$found/${#seeded[@]}" splaced="$placed/${#seeded[@]}"
    sresult=$(verdict "$rc" "$key.setup")
    case $sresult in
    crash | hang) ;;
    *)
      if [ "$sother" != 0 ]; then sresult="false red"
      elif [ "$found" != "${#seeded[@]}" ]; then sresult=missed
      elif [ "$placed" != "${#seeded[@]}" ]; then sresult=misplaced
      elif [ "$rc" != "$want_exit" ]; then sresult="exit $rc"
      else sresult=ok setupsok=$((setupsok + 1))
      fi
      ;;
    esac
    [ "$sresult" = ok ] || failed=1
  fi
  printf '| %s | %.7s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$repo" "$commit" \
    "$pub" "$pms" "$units" "$unread" "$errs" "$warns" "$sexit" "$sms" "$sunits" "$sother" "$swarns" "$sfound" "$splaced" "$sresult"
  rm -rf "$work"
done 3<"$root/bench/corpus/repos.tsv"
echo
echo "$n repositories: $clean clean, $((red - redok)) falsely red, $redok red for a true reason (expected red in repos.tsv), $crashed crashed or hung, as published"
echo "$setups setups: $setupsok as expected"
exit "$failed"
