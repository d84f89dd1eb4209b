#!/usr/bin/env bash
# Installs what the end-to-end tests run as real clients and servers:
# git (with git-http-backend), curl, Python requests, gh, jq, kubectl, the
# shells the completion tests run (zsh, fish), shellcheck (actionlint runs
# it), pre-commit, etcd with a kube-apiserver; for the client matrix and
# the transparent-mode tests also wget, Node.js with npm (and, through it,
# yarn classic and pnpm: scripts/js-clients.sh), a headless Java runtime,
# PHP with its curl extension, iptables, iproute2 and setpriv (util-linux),
# the aws CLI (awscli) with versitygw (scripts/versitygw.sh), and Squid and
# openssl for the upstream-proxy test. Installs only what is
# missing, so a second run is quick and offline; starts and enables no
# service. Quiet: one line per thing it installs, everything else only
# when a step fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# quiet runs a command with its output in a log that is printed only when
# it fails.
quiet() {
  local log
  log=$(mktemp)
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    echo "test-deps: failed: $*" >&2
    return 1
  fi
  rm -f "$log"
}

missing=()
need() { # need COMMAND DEBIAN-PACKAGE
  command -v "$1" >/dev/null 2>&1 || missing+=("$2")
}
need git git
need git-lfs git-lfs
need curl curl
need gh gh
need jq jq
need zsh zsh
need fish fish
need shellcheck shellcheck
need pre-commit pre-commit
need wget wget
need node nodejs
need npm npm
need java default-jre-headless
need php php-cli
php -m 2>/dev/null | grep -qx curl || missing+=(php-curl)
need iptables-restore iptables
need ip iproute2
need setpriv util-linux
# Squid, the forward proxy proxy/e2e's upstream-proxy test runs keyhole
# behind (its service is not started: policy-rc.d below), and openssl,
# which hashes its test password.
need squid squid
need openssl openssl
[ -x /usr/lib/git-core/git-http-backend ] || missing+=(git)
# proxy/e2e's AWS SigV4 test runs Debian's aws CLI, whatever else is on PATH.
[ -x /usr/bin/aws ] || missing+=(awscli)
# The python3 on PATH may not be Debian's; the test takes whichever of it
# and /usr/bin/python3 can import requests.
python3 -c 'import requests' >/dev/null 2>&1 || /usr/bin/python3 -c 'import requests' >/dev/null 2>&1 || missing+=(python3-requests)

if [ ${#missing[@]} -gt 0 ]; then
  echo "test-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  quiet $SUDO apt-get update -qq
  # None of these packages ships a service; policy-rc.d makes sure none
  # that a dependency brings is started here.
  policy=/usr/sbin/policy-rc.d
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
    $SUDO chmod 0755 "$policy"
    trap '$SUDO rm -f "$policy"' EXIT
  fi
  quiet $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if ! command -v kubectl >/dev/null 2>&1; then
  echo "test-deps: kubectl is missing; install it (Debian: apt-get install kubectl from the Kubernetes or Google Cloud apt repository)" >&2
  exit 1
fi
# The modules of keyhole and of its test tools, so the tests run offline.
quiet go mod download
(cd tools/actionlint && quiet go mod download)
(cd tools/staticcheck && quiet go mod download)
scripts/js-clients.sh >/dev/null # yarn classic and pnpm for proxy/e2e's npm tests, from the npm registry (installed once)
scripts/versitygw.sh >/dev/null # an S3 server that verifies SigV4, for proxy/e2e's AWS test (built once)
scripts/kube-apiserver.sh >/dev/null # etcd, and kube-apiserver for e2e/apiserver (built once, ~10 min)
scripts/agent-sandbox-controller.sh >/dev/null # agent-sandbox's controller for e2e/apiserver (built once)
# The real-cluster test (e2e/cluster): containerd, runc, the CNI plugins and
# mmdebstrap from Debian (no service started), then the kubelet and the
# other cluster binaries, Flux's source-controller and kustomize-controller,
# kube-router (its network policy controller), cert-manager's controller
# (its issuing controllers, tools/cert-manager), the release images and the test's own images, each built once into the
# cache and rebuilt only when its inputs change.
scripts/cluster-deps.sh
scripts/kube-cluster.sh >/dev/null
scripts/flux.sh >/dev/null
scripts/kube-router.sh >/dev/null
scripts/cert-manager.sh >/dev/null
scripts/images.sh >/dev/null
scripts/cluster-images.sh >/dev/null
