#!/usr/bin/env bash
# Installs the JavaScript package managers the proxy's end-to-end tests
# run besides npm (proxy/e2e, TestNpmScopedPackages): yarn classic (v1)
# and pnpm, pinned, from the npm registry with the npm on PATH, into
# ${KEYHOLE_CACHE:-<repo>/.cache}/js-clients, and prints the directory
# holding their commands (node_modules/.bin) on stdout. Quick and offline
# when they are there at the pinned versions; quiet unless it fails.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KEYHOLE_CACHE:-$repo/.cache}
dir="$cache/js-clients"
yarn_version=1.22.22
pnpm_version=10.34.8

installed() { # installed PACKAGE VERSION
  [ -f "$dir/node_modules/$1/package.json" ] &&
    grep -q "\"version\": *\"$2\"" "$dir/node_modules/$1/package.json"
}

if ! installed yarn "$yarn_version" || ! installed pnpm "$pnpm_version"; then
  command -v npm >/dev/null 2>&1 || { echo "js-clients.sh: npm is missing: apt-get install -y nodejs npm" >&2; exit 1; }
  echo "js-clients.sh: installing yarn $yarn_version and pnpm $pnpm_version into $dir" >&2
  mkdir -p "$dir"
  log=$(mktemp)
  if ! npm install --prefix "$dir" --no-audit --no-fund --no-save --loglevel=error \
      "yarn@$yarn_version" "pnpm@$pnpm_version" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "js-clients.sh: npm install failed" >&2
    exit 1
  fi
  rm -f "$log"
fi
echo "$dir/node_modules/.bin"
