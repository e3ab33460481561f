#!/usr/bin/env bash
# Everything a release publishes, built into dist/ with its checksums (make dist):
#
#   llmkube-<version>-py3-none-any.whl    the package: `pip install` gives the CLI (llmkube, kubectl-llmkube)
#   llmkube-<version>.tar.gz              its sdist
#   llmkube-<chart version>.tgz           the Helm chart (helm package)
#   llmkube-image-<version>.oci.tar       the controller image as an OCI archive: `make image`'s own
#                                         path (hack/image.sh build, ARCHIVE=...), so IMAGE, PLATFORMS,
#                                         BASE_IMAGE, CONTAINER_TOOL, BUILDER_ARGS apply as there
#   SHA256SUMS                            `sha256sum -c SHA256SUMS` checks all of them
#
# Environment (all optional):
#   DIST_DIR          where (default dist/; emptied first)
#   DIST_IMAGE        build: build the image with hack/image.sh (the default);
#                     none: leave the image out (a machine without an image builder);
#                     a path: an OCI archive `make image ARCHIVE=...` wrote before, copied in
#   PYTHON            the Python that builds the wheel and sdist (default .venv/bin/python, with uv)
#   LLMKUBE_TOOLS_BIN where helm is (default ~/.cache/llmkube/tools/bin: bash hack/build-tools.sh helm)
#
# The release workflow (.github/workflows/release.yml) runs this and pushes what it wrote.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
log() { printf '[dist %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "$*"; exit 1; }

CACHE_ROOT="${LLMKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmkube}"
TOOLS="${LLMKUBE_TOOLS_BIN:-$CACHE_ROOT/tools/bin}"
DIST="${DIST_DIR:-$REPO/dist}"
PYTHON="${PYTHON:-$REPO/.venv/bin/python}"
DIST_IMAGE="${DIST_IMAGE:-build}"

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/llmkube/__init__.py")
chart_version=$(sed -n 's/^version: //p' "$REPO/charts/llmkube/Chart.yaml")
app_version=$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' "$REPO/charts/llmkube/Chart.yaml")
[ -n "$version" ] || die "no __version__ in llmkube/__init__.py"
# One version for the package, the image and the chart: the chart's default image tag is its appVersion.
[ "$chart_version" = "$version" ] && [ "$app_version" = "$version" ] ||
  die "versions disagree: llmkube $version, chart $chart_version, appVersion $app_version (charts/llmkube/Chart.yaml)"
[ -x "$PYTHON" ] || die "$PYTHON is missing: make venv (or PYTHON=...)"
[ -x "$TOOLS/helm" ] || die "helm is missing in $TOOLS: bash hack/build-tools.sh helm"
case "$DIST_IMAGE" in
  build | none) ;;
  *) [ -f "$DIST_IMAGE" ] || die "DIST_IMAGE=$DIST_IMAGE: no such archive (build, none, or the path of one)" ;;
esac

rm -rf "$DIST"
mkdir -p "$DIST"
t0=$SECONDS

log "llmkube $version: the wheel and the sdist"
# uv builds both in an isolated environment with the build backend pyproject.toml names (hatchling).
"$PYTHON" -m uv build --quiet --sdist --wheel --out-dir "$DIST" "$REPO"
rm -f "$DIST/.gitignore"  # uv's, for an out-dir inside a checkout: not a release file

log "the chart $chart_version"
HELM_CACHE_HOME="${HELM_CACHE_HOME:-$DIST/.helm/cache}" HELM_CONFIG_HOME="${HELM_CONFIG_HOME:-$DIST/.helm/config}" \
  "$TOOLS/helm" package "$REPO/charts/llmkube" --destination "$DIST" >/dev/null
rm -rf "$DIST/.helm"

archive="$DIST/llmkube-image-$version.oci.tar"
case "$DIST_IMAGE" in
  none) log "the image left out (DIST_IMAGE=none)" ;;
  build)
    log "the image (make image's path: hack/image.sh build)"
    ARCHIVE="$archive" bash "$REPO/hack/image.sh" build
    ;;
  *)
    log "the image from $DIST_IMAGE"
    cp "$DIST_IMAGE" "$archive"
    ;;
esac

(cd "$DIST" && find . -maxdepth 1 -type f ! -name 'SHA256SUMS*' ! -name '.*' -printf '%P\n' | LC_ALL=C sort | xargs sha256sum --) \
  > "$DIST/SHA256SUMS.tmp"
mv "$DIST/SHA256SUMS.tmp" "$DIST/SHA256SUMS"
(cd "$DIST" && sha256sum --check --quiet SHA256SUMS)
log "done in $((SECONDS - t0)) s: $DIST"
cat "$DIST/SHA256SUMS" >&2
