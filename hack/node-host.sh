#!/usr/bin/env bash
# Host packages of the `node` test tier (a real kubelet + containerd + CNI bridge in a private
# network namespace) and of the local image builds: installed with apt-get when missing.
#
#   bash hack/node-host.sh          install what is missing, print what is there
#   bash hack/node-host.sh --check  only check; exit 0 when everything is installed
#
# Exit codes: 0 ready; 1 an install failed; 3 this machine cannot run the tier (not Linux, not
# root, no apt-get, no network namespaces): the message names the reason, and `make test` skips
# the tier with it. Nothing here touches the host's network configuration.
set -euo pipefail

CANNOT=3
log() { printf '[node-host %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
cannot() { log "node tier unavailable: $*"; exit "$CANNOT"; }

# Debian package -> a file it installs (checked instead of dpkg, so hand-installed tools count too).
PACKAGES=(
  "containerd:/usr/bin/containerd"
  "runc:/usr/sbin/runc"
  "containernetworking-plugins:/usr/lib/cni/bridge"
  "iptables:/usr/sbin/iptables"
  "conntrack:/usr/sbin/conntrack"
  "buildah:/usr/bin/buildah"
  "debootstrap:/usr/sbin/debootstrap"
  "iproute2:/usr/sbin/ip"
  "util-linux:/usr/bin/nsenter"
)

[ "$(uname -s)" = Linux ] || cannot "needs Linux (this is $(uname -s))"
[ "$(id -u)" = 0 ] || cannot "needs root (kubelet, containerd and network namespaces); run as root"
[ -r /proc/self/ns/net ] || cannot "the kernel has no network namespaces"

missing=()
for entry in "${PACKAGES[@]}"; do
  [ -e "${entry#*:}" ] || missing+=("${entry%%:*}")
done

if [ ${#missing[@]} -eq 0 ]; then
  log "host packages: all present ($(containerd --version | awk '{print $1, $3}'), $(runc --version | head -1))"
  exit 0
fi
[ "${1:-}" = --check ] && { log "missing packages: ${missing[*]}"; exit 1; }
command -v apt-get >/dev/null || cannot "packages missing (${missing[*]}) and there is no apt-get to install them"

log "installing ${missing[*]} (apt-get; needs root, ~30 s)"
export DEBIAN_FRONTEND=noninteractive
t0=$SECONDS
apt-get update -qq >&2
# --no-install-recommends: buildah would pull in podman-style extras (slirp, fuse-overlayfs) we do not use.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
# Debian starts the containerd service on install. The tier runs its own containerd with private
# root/state/socket directories and never talks to the system one; stop it again only if this
# script started it (it was not installed before), so a machine's own containerd is left alone.
if [[ " ${missing[*]} " == *" containerd "* ]] && command -v systemctl >/dev/null \
  && systemctl is-active --quiet containerd 2>/dev/null; then
  systemctl disable --now containerd >&2 || true
fi
log "installed ${missing[*]} in $((SECONDS - t0)) s"
