#!/usr/bin/env bash
# Prints the -ldflags value that stamps keyhole's version and revision
# (package keyhole.dev/keyhole/internal/version) from the git checkout it
# runs in, for every build outside `go install`: make, the images, the
# release. Usage: go build -ldflags "$(scripts/version-ldflags.sh)" ./cmd/...
# KEYHOLE_VERSION and KEYHOLE_REVISION, when set, win over git (a build
# from a source archive has no .git).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pkg=keyhole.dev/keyhole/internal/version
version=${KEYHOLE_VERSION:-}
revision=${KEYHOLE_REVISION:-}
if [ -z "$revision" ] && git rev-parse --git-dir >/dev/null 2>&1; then
  revision=$(git rev-parse HEAD)
  [ -z "$(git status --porcelain)" ] || revision="$revision-dirty"
  # The tag on the commit, or the nearest one and how far past it.
  [ -n "$version" ] || version=$(git describe --tags --match 'v[0-9]*' 2>/dev/null || true)
fi
flags=()
[ -z "$version" ] || flags+=("-X $pkg.version=$version")
[ -z "$revision" ] || flags+=("-X $pkg.revision=$revision")
echo "${flags[*]}"
