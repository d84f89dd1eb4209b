#!/usr/bin/env bash
# Installs the Debian packages the real-cluster end-to-end test runs:
# containerd, runc, the CNI plugins, iptables, ipset (kube-router's network
# policy controller), etcd and mmdebstrap (for the
# sandbox image's root filesystem). Their packages would start system-wide
# containerd and etcd services; a policy-rc.d that refuses every start is
# in place while they install, so nothing starts: the test runs its own,
# in its own namespaces. Installs only what is missing, quietly unless a
# step fails.
set -euo pipefail

missing=()
need() { # need COMMAND-OR-FILE DEBIAN-PACKAGE
  if [[ $1 == /* ]]; then [ -e "$1" ] || missing+=("$2"); else command -v "$1" >/dev/null 2>&1 || missing+=("$2"); fi
}
need containerd containerd
need runc runc
need /usr/lib/cni/bridge containernetworking-plugins
need iptables iptables
need ipset ipset
need etcd etcd-server
need mmdebstrap mmdebstrap
need unshare util-linux
need ip iproute2
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
policy=/usr/sbin/policy-rc.d
placed=false
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# placed by keyhole scripts/cluster-deps.sh while it installs\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
  placed=true
fi
cleanup() { if $placed; then $SUDO rm -f "$policy"; fi; }
trap cleanup EXIT

log=$(mktemp)
echo "cluster-deps: installing ${missing[*]}" >&2
if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  cat "$log" >&2
  rm -f "$log"
  exit 1
fi
rm -f "$log"
# A machine that runs systemd may still have enabled the units.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now containerd etcd >/dev/null 2>&1 || true
fi
