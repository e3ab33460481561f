#!/usr/bin/env bash
# Build the release tools our install and monitoring tests drive, from pinned releases, through the
# Go module proxy (there are no prebuilt downloads on our machines):
#
#   helm       <- helm.sh/helm/v3 $HELM_VERSION                       (chart lint, template, install),
#                 stamped with the Kubernetes version of its client-go as Helm's Makefile does
#   promtool   <- github.com/prometheus/prometheus $PROMETHEUS_MODULE  (alert rules: check and unit tests)
#   kustomize  <- sigs.k8s.io/kustomize/kustomize/v5 $KUSTOMIZE_VERSION (what Argo CD and Flux run)
#   monitoring-check <- hack/tools/monitoring-check.go against the Prometheus Operator's API types
#                       github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring $PROMETHEUS_OPERATOR_APIS
#   gitops-health    <- hack/tools/gitops-health.go: Flux's kstatus and CEL health evaluation
#                       github.com/fluxcd/pkg/runtime $FLUX_RUNTIME (its cel package; kstatus from
#                       github.com/fluxcd/cli-utils $FLUX_CLI_UTILS)
#   prometheus <- github.com/prometheus/prometheus $PROMETHEUS_MODULE (the autoscaling node test's
#                 server; Debian's 2.42 package is built without Kubernetes service discovery)
#   prometheus-adapter <- sigs.k8s.io/prometheus-adapter $PROMETHEUS_ADAPTER (cmd/adapter: the custom
#                         metrics API the autoscaling node test serves from Prometheus)
#   argocd-health    <- hack/tools/argocd-health.go: our Argo CD health scripts in gopher-lua
#                       github.com/yuin/gopher-lua $GOPHER_LUA, as Argo CD's controller runs them
#   minio      <- github.com/minio/minio $MINIO_VERSION: the S3-compatible server the Model tests
#                 download s3:// sources from (SigV4, private buckets, the S3 error codes)
#   actionlint <- github.com/rhysd/actionlint $ACTIONLINT_VERSION: the linter of GitHub Actions
#                 workflows (.github/workflows/release.yml; tests/release)
#
# Output: $LLMKUBE_TOOLS_BIN (default ~/.cache/llmkube/tools/bin). Idempotent: a binary whose stamp
# file names the pinned version is not rebuilt. Progress on stderr; the bin directory on stdout.
#   bash hack/build-tools.sh [all|helm|promtool|kustomize|monitoring-check|gitops-health|argocd-health|prometheus|prometheus-adapter|minio|actionlint]
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
# github.com/prometheus/prometheus publishes Prometheus 3.x as Go module versions v0.3xx.y.
PROMETHEUS_MODULE="${PROMETHEUS_MODULE:-v0.316.0}"
KUSTOMIZE_VERSION="${KUSTOMIZE_VERSION:-v5.7.1}"
PROMETHEUS_OPERATOR_APIS="${PROMETHEUS_OPERATOR_APIS:-v0.95.2}"
# The newest releases that build with Go 1.26 (later ones need Go 1.27).
FLUX_RUNTIME="${FLUX_RUNTIME:-v0.113.0}"
FLUX_CLI_UTILS="${FLUX_CLI_UTILS:-v1.3.0}"
FLUX_KUSTOMIZE_APIS="${FLUX_KUSTOMIZE_APIS:-v1.21.0}"
# The Lua Argo CD embeds, and the YAML reader of the argocd-cm snippet.
GOPHER_LUA="${GOPHER_LUA:-v1.1.1}"
SIGS_YAML="${SIGS_YAML:-v1.6.0}"
PROMETHEUS_ADAPTER="${PROMETHEUS_ADAPTER:-v0.12.0}"
# MinIO tags its releases RELEASE.<date>, which are no Go module versions: the module proxy serves
# its commits as pseudo-versions. This one is the newest it serves (2026-02-12).
MINIO_VERSION="${MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-v1.7.12}"
CACHE_ROOT="${LLMKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmkube}"
BIN="${LLMKUBE_TOOLS_BIN:-$CACHE_ROOT/tools/bin}"

export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath"
export CGO_ENABLED=0
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"
export GOCACHE="${GOCACHE:-$CACHE_ROOT/go-build}"

log() { printf '[build-tools %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

command -v go >/dev/null || { echo "build-tools: 'go' is not on PATH; install Go >= 1.26" >&2; exit 1; }
mkdir -p "$BIN"

fresh() {  # fresh NAME VERSION -> 0 when BIN/NAME exists and was built from VERSION
  [ -x "$BIN/$1" ] && [ "$(cat "$BIN/.$1.version" 2>/dev/null)" = "$2" ]
}

install_tool() {  # install_tool NAME VERSION PACKAGE LDFLAGS
  local name=$1 version=$2 package=$3 ldflags=$4
  if fresh "$name" "$version"; then
    log "$name $version: cached"
    return
  fi
  log "$name $version: building $package (a few minutes on 2 cores)"
  local t0=$SECONDS tmp
  tmp=$(mktemp -d)
  GOBIN="$tmp" go install -ldflags "$ldflags" "$package@$version"
  mv "$tmp/$name" "$BIN/$name"
  rmdir "$tmp"
  echo "$version" > "$BIN/.$name.version"
  log "$name $version: built in $((SECONDS - t0)) s"
}

build_helm() {
  # Helm's own Makefile stamps the Kubernetes version of the client-go it is built with (client-go
  # v0.N -> Kubernetes 1.N) as the default of `helm template` and `helm lint`; without it they
  # assume v1.20 and refuse our chart's kubeVersion. The version is read from Helm's go.mod.
  local gomod client_go kube_minor
  gomod=$(go mod download -json "helm.sh/helm/v3@$HELM_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
  client_go=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$gomod")  # v0.37.0
  kube_minor=${client_go#v0.}; kube_minor=${kube_minor%%.*}
  [ -n "$kube_minor" ] || { log "helm $HELM_VERSION: cannot read the client-go version from $gomod"; exit 1; }
  # The version stamp stays the release (older copies of this script share the cache); a second
  # stamp says which Kubernetes version the binary assumes, and a binary without it is rebuilt.
  if [ "$(cat "$BIN/.helm.kube-version" 2>/dev/null)" != "1.$kube_minor" ]; then rm -f "$BIN/.helm.version"; fi
  install_tool helm "$HELM_VERSION" helm.sh/helm/v3/cmd/helm \
    "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION \
     -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$kube_minor \
     -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$kube_minor"
  echo "1.$kube_minor" > "$BIN/.helm.kube-version"
}

build_promtool() {
  local minor=${PROMETHEUS_MODULE#v0.}; minor=${minor%%.*}; minor=$((10#$minor % 100))  # v0.316.0 -> 16
  local patch=${PROMETHEUS_MODULE##*.}
  install_tool promtool "$PROMETHEUS_MODULE" github.com/prometheus/prometheus/cmd/promtool \
    "-s -w -X github.com/prometheus/common/version.Version=3.$minor.$patch"
}

build_prometheus() {
  # The same module as promtool, so most of it is already compiled in GOCACHE by then. Without the
  # builtinassets tag the web UI is not embedded (the HTTP API, all the tests use, is there).
  local minor=${PROMETHEUS_MODULE#v0.}; minor=${minor%%.*}; minor=$((10#$minor % 100))
  local patch=${PROMETHEUS_MODULE##*.}
  install_tool prometheus "$PROMETHEUS_MODULE" github.com/prometheus/prometheus/cmd/prometheus \
    "-s -w -X github.com/prometheus/common/version.Version=3.$minor.$patch"
}

build_kustomize() {
  install_tool kustomize "$KUSTOMIZE_VERSION" sigs.k8s.io/kustomize/kustomize/v5 \
    "-s -w -X sigs.k8s.io/kustomize/api/provenance.version=$KUSTOMIZE_VERSION"
}

build_go_program() {  # build_go_program NAME VERSIONS MODULE WHAT MODULE@VERSION...
  # One of our own small programs (hack/tools/NAME.go) built against pinned modules: the version
  # stamp covers the pinned versions and the source file.
  local name=$1 versions=$2 module=$3 what=$4 here stamp_value mod
  shift 4
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  stamp_value="$versions-$(sha256sum "$here/tools/$name.go" | cut -c1-12)"
  if fresh "$name" "$stamp_value"; then
    log "$name $stamp_value: cached"
    return
  fi
  mod="$CACHE_ROOT/build/$name-${versions%%-*}"
  mkdir -p "$mod"
  cp "$here/tools/$name.go" "$mod/main.go"
  log "$name $stamp_value: building against $what"
  local t0=$SECONDS
  (
    cd "$mod"
    [ -f go.mod ] || printf 'module %s\n\ngo 1.26\n' "$module" > go.mod
    go get "$@" >&2
    go mod tidy >&2
    go build -ldflags "-s -w" -o "$BIN/$name.tmp" .
  )
  mv "$BIN/$name.tmp" "$BIN/$name"
  echo "$stamp_value" > "$BIN/.$name.version"
  log "$name $stamp_value: built in $((SECONDS - t0)) s"
}

build_monitoring_check() {
  build_go_program monitoring-check "$PROMETHEUS_OPERATOR_APIS" llmkube.dev/monitoringcheck \
    "the Prometheus Operator API types" \
    "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring@$PROMETHEUS_OPERATOR_APIS"
}

build_gitops_health() {
  build_go_program gitops-health "$FLUX_RUNTIME-$FLUX_CLI_UTILS" llmkube.dev/gitopshealth \
    "Flux's kstatus and CEL evaluator (~4 min cold)" \
    "github.com/fluxcd/pkg/runtime@$FLUX_RUNTIME" "github.com/fluxcd/cli-utils@$FLUX_CLI_UTILS" \
    "github.com/fluxcd/pkg/apis/kustomize@$FLUX_KUSTOMIZE_APIS"
}

build_argocd_health() {
  build_go_program argocd-health "$GOPHER_LUA-$SIGS_YAML" llmkube.dev/argocdhealth \
    "gopher-lua, the Lua of Argo CD" \
    "github.com/yuin/gopher-lua@$GOPHER_LUA" "sigs.k8s.io/yaml@$SIGS_YAML"
}

build_prometheus_adapter() {
  # Built inside the release's own module (its go.mod and go.sum, as its Makefile builds it), not with
  # `go install ...@version`: that asks the proxy for the module's version list (for deprecation
  # notices), which proxy.golang.org refuses for this module with 403 "This module version is not
  # available", while the pinned version itself downloads.
  local name=prometheus-adapter version=$PROMETHEUS_ADAPTER dir
  if fresh "$name" "$version"; then
    log "$name $version: cached"
    return
  fi
  log "$name $version: building sigs.k8s.io/prometheus-adapter/cmd/adapter (~3 min cold on 2 cores)"
  local t0=$SECONDS
  dir=$(go mod download -json "sigs.k8s.io/prometheus-adapter@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -d "$dir" ] || { log "$name $version: the module did not download"; exit 1; }
  (cd "$dir" && go build -ldflags "-s -w" -o "$BIN/$name.tmp" ./cmd/adapter)
  mv "$BIN/$name.tmp" "$BIN/$name"
  echo "$version" > "$BIN/.$name.version"
  log "$name $version: built in $((SECONDS - t0)) s"
}

build_minio() {
  # MinIO stamps its version into the binary (`minio --version`, the Server header) at build time.
  install_tool minio "$MINIO_VERSION" github.com/minio/minio \
    "-s -w -X github.com/minio/minio/cmd.Version=$MINIO_VERSION -X github.com/minio/minio/cmd.ReleaseTag=$MINIO_VERSION"
}

build_actionlint() {
  install_tool actionlint "$ACTIONLINT_VERSION" github.com/rhysd/actionlint/cmd/actionlint \
    "-s -w -X github.com/rhysd/actionlint.version=$ACTIONLINT_VERSION"
}

t_start=$SECONDS
case "${1:-all}" in
  all) build_kustomize; build_promtool; build_helm; build_monitoring_check; build_gitops_health; build_argocd_health
       build_prometheus; build_prometheus_adapter; build_minio; build_actionlint ;;
  helm) build_helm ;;
  promtool) build_promtool ;;
  kustomize) build_kustomize ;;
  monitoring-check) build_monitoring_check ;;
  gitops-health) build_gitops_health ;;
  argocd-health) build_argocd_health ;;
  prometheus) build_prometheus ;;
  prometheus-adapter) build_prometheus_adapter ;;
  minio) build_minio ;;
  actionlint) build_actionlint ;;
  *) echo "usage: $0 [all|helm|promtool|kustomize|monitoring-check|gitops-health|argocd-health|prometheus|prometheus-adapter|minio|actionlint]" >&2; exit 2 ;;
esac
log "done in $((SECONDS - t_start)) s; tools in $BIN"
echo "$BIN"
