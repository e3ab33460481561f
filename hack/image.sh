#!/usr/bin/env bash
# The controller image, built from the Dockerfile by whichever builder the machine has, and pushed:
#
#   bash hack/image.sh build     (make image)   -> $IMAGE, default localhost/llmkube:<version>
#   bash hack/image.sh push      (make push REGISTRY=ghcr.io/you)  -> $REGISTRY/llmkube:<tag>
#
# The node tier builds its controller image through this script too (hack/build-images.sh), so what
# the tests run is what `make image` makes.
#
# Environment (all optional):
#   CONTAINER_TOOL   buildah, podman or docker; default: the first of them found, in that order
#   IMAGE            the image to build or push (default localhost/llmkube:<llmkube.__version__>)
#   EXTRA_TAGS       more names for the same image, space-separated
#   PLATFORMS        e.g. linux/amd64,linux/arm64: a multi-arch manifest list where the builder can
#                    (an emulator in binfmt_misc for each foreign architecture); otherwise the
#                    host's architecture only, saying so. Default: the host's.
#   BASE_IMAGE       the Dockerfile's base (default: its pinned python:3.11-slim)
#   ARCHIVE          also write the image to this OCI archive (kind load image-archive, k3s ctr
#                    images import, a registry-less machine)
#   REGISTRY         for push: where to (the image keeps its last path element and tag)
#   BUILDER_ARGS     global options of the builder (e.g. buildah --root DIR)
#   BUILD_ARGS       more options of its build command (e.g. --network host, -v mounts)
#   PUSH_ARGS        more options of its push command (e.g. --creds, or --tls-verify=false for a
#                    plain-HTTP test registry)
#
# Progress: the builder's own output, on stderr; one line per step of this script.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
log() { printf '[image %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "$*"; exit 1; }

version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/llmkube/__init__.py")
[ -n "$version" ] || die "no __version__ in llmkube/__init__.py"
IMAGE="${IMAGE:-localhost/llmkube:$version}"
read -r -a builder_args <<< "${BUILDER_ARGS:-}"
read -r -a build_args <<< "${BUILD_ARGS:-}"
read -r -a extra_tags <<< "${EXTRA_TAGS:-}"
read -r -a push_args <<< "${PUSH_ARGS:-}"

pick_tool() {
  if [ -n "${CONTAINER_TOOL:-}" ]; then
    command -v "$CONTAINER_TOOL" >/dev/null || die "CONTAINER_TOOL=$CONTAINER_TOOL is not on PATH"
    echo "$CONTAINER_TOOL"; return
  fi
  local tool
  for tool in buildah podman docker; do
    command -v "$tool" >/dev/null && { echo "$tool"; return; }
  done
  die "no image builder: install buildah, podman or docker (or set CONTAINER_TOOL)"
}
TOOL=$(pick_tool)
tool() { "$TOOL" "${builder_args[@]}" "$@"; }

host_platform() {
  local arch
  case "$(uname -m)" in
    x86_64) arch=amd64 ;;
    aarch64 | arm64) arch=arm64 ;;
    armv7l) arch=arm/v7 ;;
    *) arch=$(uname -m) ;;
  esac
  echo "linux/$arch"
}

# The emulator binfmt_misc needs to run a foreign architecture's RUN steps (qemu-user-static).
emulator_for() {
  case "$1" in
    linux/amd64) echo qemu-x86_64 ;;
    linux/arm64) echo qemu-aarch64 ;;
    linux/arm/v7 | linux/arm) echo qemu-arm ;;
    linux/ppc64le) echo qemu-ppc64le ;;
    linux/s390x) echo qemu-s390x ;;
    *) echo "qemu-${1#linux/}" ;;
  esac
}

# The platforms this builder can make here: the asked ones it can emulate, else the host's alone.
buildable_platforms() {
  local host asked=() ok=() missing=() platform
  host=$(host_platform)
  IFS=, read -r -a asked <<< "${PLATFORMS:-$host}"
  for platform in "${asked[@]}"; do
    if [ "$platform" = "$host" ] || [ -e "/proc/sys/fs/binfmt_misc/$(emulator_for "$platform")" ]; then
      ok+=("$platform")
    else
      missing+=("$platform")
    fi
  done
  if [ "$TOOL" = docker ] && [ "${#ok[@]}" -gt 1 ] && ! docker buildx version >/dev/null 2>&1; then
    log "docker without buildx builds one platform: building $host only"
    ok=("$host"); missing=()
  fi
  if [ "${#missing[@]}" -gt 0 ]; then
    log "cannot build ${missing[*]} here: no $(for p in "${missing[@]}"; do emulator_for "$p"; done | tr '\n' ' ')in" \
      "/proc/sys/fs/binfmt_misc (install qemu-user-static, or build on such a machine)"
    [ "${#ok[@]}" -gt 0 ] || { log "building the host's $host instead"; ok=("$host"); }
  fi
  (IFS=,; echo "${ok[*]}")
}

build() {
  local platforms revision t0=$SECONDS
  platforms=$(buildable_platforms)
  revision=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
  local args=(--file "$REPO/Dockerfile" --build-arg "VERSION=$version" --build-arg "REVISION=$revision")
  [ -n "${BASE_IMAGE:-}" ] && args+=(--build-arg "BASE_IMAGE=$BASE_IMAGE")
  log "$IMAGE: building with $TOOL for $platforms (llmkube $version, revision ${revision:0:12})"
  case "$TOOL" in
    buildah | podman)
      if [[ "$platforms" == *,* ]]; then
        # A manifest list named $IMAGE, one image per platform in it.
        tool manifest rm "$IMAGE" >/dev/null 2>&1 || true
        tool build "${args[@]}" --platform "$platforms" --format oci --manifest "$IMAGE" "${build_args[@]}" "$REPO"
      else
        tool build "${args[@]}" --platform "$platforms" --format oci --tag "$IMAGE" "${build_args[@]}" "$REPO"
      fi
      local name
      for name in "${extra_tags[@]}"; do tool tag "$IMAGE" "$name"; done
      if [ -n "${ARCHIVE:-}" ]; then
        # An OCI layout holds one ref per tag; its tar is an OCI archive with every name in its index.
        local layout="$ARCHIVE.layout"
        rm -rf "$layout"
        for name in "$IMAGE" "${extra_tags[@]}"; do
          if [[ "$platforms" == *,* ]]; then
            tool manifest push --quiet --all "$IMAGE" "oci:$layout:$name" >/dev/null
          else
            tool push --quiet "$IMAGE" "oci:$layout:$name" >/dev/null
          fi
        done
        tar -C "$layout" -cf "$ARCHIVE.tmp" oci-layout index.json blobs
        rm -rf "$layout"
        mv "$ARCHIVE.tmp" "$ARCHIVE"
        log "$IMAGE: written to $ARCHIVE ($(du -h "$ARCHIVE" | cut -f1))"
      fi
      ;;
    docker)
      local tags=(--tag "$IMAGE") name
      for name in "${extra_tags[@]}"; do tags+=(--tag "$name"); done
      if [[ "$platforms" == *,* ]]; then
        # A multi-platform result cannot be loaded into the classic image store: it stays in the
        # buildx cache, which `push` builds from again (every step cached).
        tool buildx build "${args[@]}" --platform "$platforms" "${tags[@]}" "${build_args[@]}" \
          ${ARCHIVE:+--output "type=oci,dest=$ARCHIVE"} "$REPO"
      else
        tool build "${args[@]}" --platform "$platforms" "${tags[@]}" "${build_args[@]}" "$REPO"
        if [ -n "${ARCHIVE:-}" ]; then tool save --output "$ARCHIVE" "$IMAGE" "${extra_tags[@]}"; fi
      fi
      ;;
  esac
  log "$IMAGE: built in $((SECONDS - t0)) s"
}

push() {
  [ -n "${REGISTRY:-}" ] || die "REGISTRY is empty: make push REGISTRY=ghcr.io/you (or registry.example.com/team)"
  local target="${REGISTRY%/}/${IMAGE##*/}" t0=$SECONDS
  log "$IMAGE -> $target (with $TOOL)"
  case "$TOOL" in
    buildah | podman)
      if tool manifest inspect "$IMAGE" >/dev/null 2>&1; then
        tool manifest push --all "${push_args[@]}" "$IMAGE" "docker://$target"
      else
        tool push "${push_args[@]}" "$IMAGE" "docker://$target"
      fi
      ;;
    docker)
      local platforms; platforms=$(buildable_platforms)
      if [[ "$platforms" == *,* ]]; then
        local revision; revision=$(git -C "$REPO" rev-parse HEAD 2>/dev/null || echo unknown)
        tool buildx build --file "$REPO/Dockerfile" --build-arg "VERSION=$version" \
          --build-arg "REVISION=$revision" ${BASE_IMAGE:+--build-arg "BASE_IMAGE=$BASE_IMAGE"} \
          --platform "$platforms" --tag "$target" --push "${build_args[@]}" "$REPO"
      else
        tool tag "$IMAGE" "$target"
        tool push "${push_args[@]}" "$target"
      fi
      ;;
  esac
  log "$target: pushed in $((SECONDS - t0)) s"
}

# Called from the last line, which also exits: bash reads a script as it runs it, and this way a
# running build has read all of it, so editing the file cannot change what it does.
main() {
  case "${1:-}" in
    build) build ;;
    push) push ;;
    *) echo "usage: $0 build|push (see the top of this file for the environment)" >&2; exit 2 ;;
  esac
}

main "$@"; exit
