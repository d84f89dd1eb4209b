#!/usr/bin/env bash
# Installs a released keyhole binary, verified: downloads the release's
# checksums.txt and this platform's archive, checks the archive's SHA-256
# against its line in checksums.txt, and only then extracts keyhole into
# DIR. The GitHub Action and the pre-commit hook install keyhole with it,
# and build from source only when it exits 3.
#
# Usage: scripts/download-keyhole.sh VERSION DIR
# KEYHOLE_RELEASES is the base URL of the releases, under which
# VERSION/checksums.txt and VERSION/keyhole_VERSION_OS_ARCH.tar.gz are
# (default https://github.com/keyhole-dev/keyhole/releases/download).
#
# Exit status: 0 installed and verified; 3 no release to install (VERSION
# is not a release tag, the release or this platform's archive does not
# exist): the caller may build from source, and the reason is on stderr;
# 1 anything else, a checksum that does not match above all: nothing is
# installed, and nothing unverified ever runs.
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 VERSION DIR" >&2
  exit 2
fi
version=$1 dir=$2
base=${KEYHOLE_RELEASES:-https://github.com/keyhole-dev/keyhole/releases/download}
none() {
  echo "keyhole: no release to download: $*" >&2
  exit 3
}
# Release tags are vMAJOR.MINOR.PATCH with an optional pre-release; a
# commit, a branch or a major-version tag names no single release.
[ -n "$version" ] || none "no version given"
[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || none "$version is not a release tag"
case $(uname -s) in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) none "no release is built for $(uname -s)" ;;
esac
case $(uname -m) in
  x86_64 | amd64) arch=amd64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) none "no release is built for $(uname -m)" ;;
esac
if command -v sha256sum > /dev/null; then
  sha256() { sha256sum "$1" | cut -d' ' -f1; }
else
  sha256() { shasum -a 256 "$1" | cut -d' ' -f1; }
fi
name="keyhole_${version}_${os}_${arch}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# fetch URL FILE MISSING: downloads URL into FILE. A 404 means there is
# no release to install (none MISSING); any other failure ends with 1.
fetch() {
  local code
  code=$(curl -sSL --proto '=https,http' --retry 3 --connect-timeout 20 -o "$2" -w '%{http_code}' "$1") || {
    echo "keyhole: cannot download $1" >&2
    exit 1
  }
  case $code in
    200) ;;
    404) none "$3" ;;
    *)
      echo "keyhole: $1: HTTP $code" >&2
      exit 1
      ;;
  esac
}

fetch "$base/$version/checksums.txt" "$tmp/checksums.txt" "$base/$version/checksums.txt is not found (HTTP 404)"
fetch "$base/$version/$name.tar.gz" "$tmp/$name.tar.gz" "release $version has no $name.tar.gz (HTTP 404)"
want=$(awk -v f="$name.tar.gz" '$2 == f || $2 == "*" f { print $1; exit }' "$tmp/checksums.txt")
if ! [[ $want =~ ^[0-9a-f]{64}$ ]]; then
  echo "keyhole: checksums.txt of $version lists no SHA-256 for $name.tar.gz: refusing to install it" >&2
  exit 1
fi
got=$(sha256 "$tmp/$name.tar.gz")
if [ "$got" != "$want" ]; then
  echo "keyhole: $name.tar.gz does not match checksums.txt of $version (SHA-256 $got, want $want): refusing to install it" >&2
  exit 1
fi
tar -xzf "$tmp/$name.tar.gz" -C "$tmp" "$name/keyhole"
mkdir -p "$dir"
# A rename into place: a half-written binary is never at DIR/keyhole.
mv -f "$tmp/$name/keyhole" "$dir/.keyhole.$$"
chmod 755 "$dir/.keyhole.$$"
mv -f "$dir/.keyhole.$$" "$dir/keyhole"
echo "keyhole: installed $name, SHA-256 $got as checksums.txt lists it" >&2
