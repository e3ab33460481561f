#!/usr/bin/env bash
# Build the control-plane binaries our tests and `llmkube run` need, from pinned releases,
# through the Go module proxy (there are no prebuilt downloads on our machines).
#
#   kube-apiserver, kube-controller-manager, kube-scheduler,
#   kubectl (the API-server tests drive it too)              <- k8s.io/kubernetes $K8S_VERSION
#   kubelet, kube-proxy (`node`: the node tier)              <- k8s.io/kubernetes $K8S_VERSION
#   etcd                                                     <- go.etcd.io/etcd/server/v3 $ETCD_VERSION
#   kwok                                                     <- sigs.k8s.io/kwok $KWOK_VERSION
#
# Output: $LLMKUBE_K8S_BIN (default ~/.cache/llmkube/k8s-$K8S_VERSION/bin). Idempotent: a binary
# whose stamp file names the pinned version is not rebuilt. Safe to run unattended.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE_ROOT="${LLMKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmkube}"
BIN="${LLMKUBE_K8S_BIN:-$CACHE_ROOT/k8s-$K8S_VERSION/bin}"
WORK="$CACHE_ROOT/build"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"   # v1.37.2 <=> v0.37.2

export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath"
export CGO_ENABLED=0
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
# Keep the Go build cache with our own cache so a re-run after a partial build is cheap.
export GOCACHE="${GOCACHE:-$CACHE_ROOT/go-build}"

log() { printf '[build-k8s %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

command -v go >/dev/null || { echo "build-k8s: 'go' is not on PATH; install Go >= 1.26" >&2; exit 1; }
mkdir -p "$BIN" "$WORK"

fresh() {  # fresh NAME VERSION -> 0 when BIN/NAME exists and was built from VERSION
  [ -x "$BIN/$1" ] && [ "$(cat "$BIN/.$1.version" 2>/dev/null)" = "$2" ]
}
stamp() { echo "$2" > "$BIN/.$1.version"; }

CONTROL_PLANE_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
# kubelet needs no cgo: the pure-Go build runs the node tier's pods (cgroupfs driver, no systemd).
NODE_COMMANDS=(kubelet kube-proxy)
# The wrapper module keeps every command we may build, so `go mod tidy` runs once for all of them.
WRAPPED_COMMANDS=("${CONTROL_PLANE_COMMANDS[@]}" "${NODE_COMMANDS[@]}")

build_kubernetes() {  # build_kubernetes COMMAND...
  local need=()
  for cmd in "$@"; do
    fresh "$cmd" "$K8S_VERSION" || need+=("$cmd")
  done
  [ ${#need[@]} -eq 0 ] && { log "kubernetes $K8S_VERSION ($*): cached"; return; }
  local mod="$WORK/kubernetes-$K8S_VERSION"
  mkdir -p "$mod"
  cd "$mod"
  if [ ! -f go.sum ]; then
    log "kubernetes $K8S_VERSION: preparing wrapper module"
    # k8s.io/kubernetes replaces its staging repos with ./staging paths, which do not apply to a
    # dependency: point every one of them at the matching published v0.X.Y release instead.
    local gomod
    gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    {
      echo "module llmkube.dev/k8sbuild"
      echo
      grep -E '^go [0-9.]+' "$gomod"
      echo
      echo "require k8s.io/kubernetes $K8S_VERSION"
      echo
      echo "replace ("
      grep -oE '^\s*k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" \
        | awk -v v="$STAGING_VERSION" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } > go.mod
  fi
  # A wrapper made for fewer commands (an older cache) learns the rest: rewrite tools.go, re-tidy.
  if [ "$(cat .commands 2>/dev/null)" != "${WRAPPED_COMMANDS[*]}" ]; then
    log "kubernetes $K8S_VERSION: resolving the dependencies of ${WRAPPED_COMMANDS[*]}"
    {
      printf '//go:build tools\n\npackage tools\n\nimport (\n'
      printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "${WRAPPED_COMMANDS[@]}"
      printf ')\n'
    } > tools.go
    go mod tidy -e >&2
    echo "${WRAPPED_COMMANDS[*]}" > .commands
  fi
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
  ldflags+=" -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  for cmd in "${need[@]}"; do
    log "kubernetes $K8S_VERSION: building $cmd"
    local t0=$SECONDS
    go build -ldflags "$ldflags" -o "$BIN/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
    mv "$BIN/$cmd.tmp" "$BIN/$cmd"; stamp "$cmd" "$K8S_VERSION"
    log "kubernetes $K8S_VERSION: built $cmd in $((SECONDS - t0)) s"
  done
}

build_etcd() {
  fresh etcd "$ETCD_VERSION" && { log "etcd $ETCD_VERSION: cached"; return; }
  local mod="$WORK/etcd-$ETCD_VERSION"
  mkdir -p "$mod"; cd "$mod"
  if [ ! -f go.sum ]; then
    log "etcd $ETCD_VERSION: preparing wrapper module"
    printf 'module llmkube.dev/etcdbuild\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > go.mod
    cat > main.go <<'GO'
// A plain etcd server: etcd's own main package cannot be built as a dependency (its
// module uses replace directives), but etcdmain.Main is the same entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
    go mod tidy -e >&2
  fi
  log "etcd $ETCD_VERSION: building"
  local t0=$SECONDS
  go build -ldflags "-s -w" -o "$BIN/etcd.tmp" .
  mv "$BIN/etcd.tmp" "$BIN/etcd"; stamp etcd "$ETCD_VERSION"
  log "etcd $ETCD_VERSION: built in $((SECONDS - t0)) s"
}

build_kwok() {
  if ! fresh kwok "$KWOK_VERSION"; then
    log "kwok $KWOK_VERSION: building"
    local t0=$SECONDS
    GOBIN="$BIN" go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
    stamp kwok "$KWOK_VERSION"
    log "kwok $KWOK_VERSION: built in $((SECONDS - t0)) s"
  else
    log "kwok $KWOK_VERSION: cached"
  fi
  # The kwok binary ships no default stages (only kwokctl embeds them): take the release's own
  # "fast" node and pod stages from the module source so nodes turn Ready and pods Running/Ready.
  if [ ! -s "$BIN/kwok-stages.yaml" ] || [ "$(cat "$BIN/.kwok-stages.version" 2>/dev/null)" != "$KWOK_VERSION" ]; then
    local src
    src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    local stage
    : > "$BIN/kwok-stages.yaml.tmp"
    for stage in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
                 pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
      { echo "---"; cat "$src/kustomize/stage/$stage"; } >> "$BIN/kwok-stages.yaml.tmp"
    done
    mv "$BIN/kwok-stages.yaml.tmp" "$BIN/kwok-stages.yaml"; stamp kwok-stages "$KWOK_VERSION"
  fi
}

t_start=$SECONDS
only="${1:-all}"
case "$only" in
  all) build_etcd; build_kwok; build_kubernetes "${CONTROL_PLANE_COMMANDS[@]}" ;;
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  kubernetes) build_kubernetes "${CONTROL_PLANE_COMMANDS[@]}" ;;
  node) build_kubernetes "${NODE_COMMANDS[@]}" ;;
  *) echo "usage: $0 [all|etcd|kwok|kubernetes|node]" >&2; exit 2 ;;
esac
log "done in $((SECONDS - t_start)) s; binaries in $BIN ($(du -sh "$BIN" | cut -f1)); cache $(du -sh "$CACHE_ROOT" 2>/dev/null | cut -f1)"
echo "$BIN"
