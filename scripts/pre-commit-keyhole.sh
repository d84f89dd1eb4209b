#!/usr/bin/env bash
# The keyhole-check pre-commit hook (.pre-commit-hooks.yaml): installs
# keyhole once per pinned rev into the hook's checkout, then runs
# `keyhole check` with the hook's args. The rev's release is downloaded
# and verified against its checksums.txt (scripts/download-keyhole.sh);
# only a rev with no release (a commit, a branch) is built from source,
# which needs Go.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin="$here/.keyhole-bin"
# git on the hook's own checkout: a hook runs inside the user's git
# commit, whose GIT_DIR and GIT_INDEX_FILE name the user's repository.
hookgit() {
  env -u GIT_DIR -u GIT_WORK_TREE -u GIT_INDEX_FILE -u GIT_OBJECT_DIRECTORY -u GIT_ALTERNATE_OBJECT_DIRECTORIES \
    git -C "$here" "$@"
}
if [ ! -x "$bin/keyhole" ]; then
  head=$(hookgit rev-parse HEAD 2> /dev/null || true)
  version=$(hookgit describe --tags --exact-match --match 'v[0-9]*' HEAD 2> /dev/null || true)
  origin=$(hookgit remote get-url origin 2> /dev/null || true)
  if [ -z "$version" ] && [ -n "$head" ] && [[ $origin =~ ^https:// ]]; then
    # pre-commit fetches the pinned rev alone, without its tag: ask the
    # remote which release tag names this commit.
    version=$(hookgit ls-remote --tags origin 'v*' 2> /dev/null |
      awk -v h="$head" '$1 == h { sub("^refs/tags/", "", $2); sub("\\^\\{\\}$", "", $2); print $2; exit }')
  fi
  if [ -z "${KEYHOLE_RELEASES:-}" ] && [[ $origin =~ ^https://github\.com/([^/]+/[^/]+)$ ]]; then
    KEYHOLE_RELEASES="https://github.com/${BASH_REMATCH[1]%.git}/releases/download"
    export KEYHOLE_RELEASES
  fi
  status=0
  "$here/scripts/download-keyhole.sh" "$version" "$bin" || status=$?
  case $status in
    0) ;;
    3)
      echo "keyhole: building keyhole from the hook's source at ${head:0:12} instead (go build, once per rev; needs Go)" >&2
      (
        unset GIT_DIR GIT_WORK_TREE GIT_INDEX_FILE GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
        cd "$here"
        ldflags=$(scripts/version-ldflags.sh)
        mkdir -p "$bin"
        CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$bin/.keyhole.$$" ./cmd/keyhole
        mv -f "$bin/.keyhole.$$" "$bin/keyhole"
      )
      ;;
    *) exit "$status" ;;
  esac
fi
exec "$bin/keyhole" check "$@"
