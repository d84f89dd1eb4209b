#!/usr/bin/env bash
# Installs what the end-to-end tests run as real clients and servers:
# git (with git-http-backend), curl, Python requests, gh and kubectl; for
# the client matrix and the transparent-mode tests also wget, Node.js,
# a headless Java runtime, iptables, iproute2 and setpriv (util-linux).
# Installs only what is missing, so a second run is quick and offline.
set -euo pipefail

missing=()
need() { # need COMMAND DEBIAN-PACKAGE
  command -v "$1" >/dev/null 2>&1 || missing+=("$2")
}
need git git
need curl curl
need gh gh
need wget wget
need node nodejs
need java default-jre-headless
need iptables-restore iptables
need ip iproute2
need setpriv util-linux
[ -x /usr/lib/git-core/git-http-backend ] || missing+=(git)
# The python3 on PATH may not be Debian's; the test takes whichever of it
# and /usr/bin/python3 can import requests.
python3 -c 'import requests' >/dev/null 2>&1 || /usr/bin/python3 -c 'import requests' >/dev/null 2>&1 || missing+=(python3-requests)

if [ ${#missing[@]} -gt 0 ]; then
  echo "test-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! command -v kubectl >/dev/null 2>&1; then
  echo "test-deps: kubectl is missing; install it (Debian: apt-get install kubectl from the Kubernetes or Google Cloud apt repository)" >&2
  exit 1
fi
go mod download
"$(dirname "${BASH_SOURCE[0]}")/kube-apiserver.sh" >/dev/null # etcd, and kube-apiserver for e2e/apiserver (built once, ~10 min)
