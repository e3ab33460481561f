#!/usr/bin/env bash
# Local container images of the node tier, built without any registry and cached as OCI archives:
#
#   llmkube-pause.tar         localhost/llmkube-pause:local     pod sandbox (static Go binary, FROM scratch)
#   llmkube.tar               localhost/llmkube:dev             the controller: `make image` (hack/image.sh), also
#                             localhost/llmkube:<version>       tagged as it names it
#   llmkube-curl.tar          localhost/llmkube-curl:local      the model-downloader init container
#   llama-server.tar          localhost/llama-server:cpu        llama.cpp's server, CPU backend
#
# built on two intermediate images that stay in buildah's store (and are archived too, so a wiped
# store is refilled without a rebuild):
#   llmkube-debian.tar        localhost/llmkube-debian:bookworm debootstrap of Debian bookworm (minbase + curl)
#   llmkube-python.tar        localhost/llmkube-python:3.11     + python3, python3-venv: stands in for python:3.11-slim
#
#   bash hack/build-images.sh [all|pause|base|python|controller|curl|llama-server]
#
# Output: $LLMKUBE_IMAGES_DIR (default ~/.cache/llmkube/images). Idempotent: every archive has an
# `.inputs` stamp with the hash of what it was built from (sources, Containerfile, base image,
# pinned versions); an archive whose stamp matches is not rebuilt. Needs root and the packages of
# hack/node-host.sh (buildah, debootstrap). Progress goes to stderr.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
CACHE_ROOT="${LLMKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmkube}"
IMAGES="${LLMKUBE_IMAGES_DIR:-$CACHE_ROOT/images}"
WORK="$CACHE_ROOT/image-build"
DEBIAN_SUITE="${DEBIAN_SUITE:-bookworm}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
DEBIAN_PACKAGES="ca-certificates,curl,libgomp1"
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"   # its sdist vendors llama.cpp
JOBS="${LLMKUBE_BUILD_JOBS:-$(nproc)}"
PYTHON="${PYTHON:-python3}"
# The build containers run on the host network (chroot isolation): a TLS-intercepting proxy is
# then trusted through the host's CA bundle, mounted over the image's own.
HOST_CA="${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

HERE="$REPO/hack/images"
BASE_REF=localhost/llmkube-debian:bookworm
PYTHON_REF=localhost/llmkube-python:3.11
PAUSE_REF=localhost/llmkube-pause:local
CONTROLLER_REF=localhost/llmkube:dev
CURL_REF=localhost/llmkube-curl:local
LLAMA_REF=localhost/llama-server:cpu

log() { printf '[build-images %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

[ "$(id -u)" = 0 ] || { log "needs root (debootstrap, buildah); run hack/node-host.sh first"; exit 3; }
for tool in buildah debootstrap go; do
  command -v "$tool" >/dev/null || { log "'$tool' is missing: run bash hack/node-host.sh"; exit 1; }
done
mkdir -p "$IMAGES" "$WORK"

bah() { buildah --root "$WORK/storage" --runroot "$WORK/runroot" --storage-driver overlay "$@"; }

# hash_inputs ARG... -> 16 hex digits; an argument `@PATH` stands for the content of that file or
# of every file below that directory (caches excluded), anything else for itself.
hash_inputs() {
  local arg
  for arg in "$@"; do
    case "$arg" in
      @*)
        local path="${arg#@}"
        if [ -d "$path" ]; then
          (cd "$path" && find . -type f -not -path '*/__pycache__/*' -not -name '*.pyc' -print0 \
            | LC_ALL=C sort -z | xargs -0 sha256sum)
        else
          sha256sum < "$path"
        fi ;;
      *) printf '%s\n' "$arg" ;;
    esac
  done | sha256sum | cut -c1-16
}

fresh() {  # fresh NAME HASH -> 0 when NAME.tar exists and was built from HASH
  [ -s "$IMAGES/$1.tar" ] && [ "$(cat "$IMAGES/$1.tar.inputs" 2>/dev/null)" = "$2" ]
}

save() {  # save NAME REF HASH: archive REF (OCI layout, compressed layers) and stamp it
  bah push --quiet "$2" "oci-archive:$IMAGES/$1.tar.tmp:$2" >/dev/null
  mv "$IMAGES/$1.tar.tmp" "$IMAGES/$1.tar"
  echo "$3" > "$IMAGES/$1.tar.inputs"
  log "$2: archived as $IMAGES/$1.tar ($(du -h "$IMAGES/$1.tar" | cut -f1))"
}

# An intermediate image must be in buildah's store to build on; refill it from its archive.
ensure_in_store() {  # ensure_in_store NAME REF
  bah inspect --type image "$2" >/dev/null 2>&1 && return
  log "$2: loading from $IMAGES/$1.tar"
  bah pull --quiet "oci-archive:$IMAGES/$1.tar" >/dev/null
  bah tag "$(bah images --quiet --filter dangling=true | head -1)" "$2" 2>/dev/null || true
  bah inspect --type image "$2" >/dev/null 2>&1 || { log "$2: cannot load $IMAGES/$1.tar"; exit 1; }
}

# The builder's whole output goes to a log; its steps and compile progress ("[ 42%] Building ...")
# to stderr.
filtered() {  # filtered REF COMMAND...
  local ref=$1
  shift
  local build_log="$WORK/build-${ref//[\/:]/_}.log"
  if ! "$@" 2>&1 \
      | tee "$build_log" | { grep --line-buffered -E '^(\[[0-9]+/[0-9]+\] )?STEP [0-9]+/[0-9]+:|^\[ *[0-9]+%\] (Built|Linking)|^\[image ' || true; } \
      | sed -u "s|^|[build-images] $ref: |" >&2; then
    log "$ref: build failed; the end of $build_log:"; tail -30 "$build_log" >&2; exit 1
  fi
}

build_file() {  # build_file REF CONTAINERFILE CONTEXT [buildah build args...]
  local ref=$1 file=$2 context=$3
  shift 3
  filtered "$ref" bah build --isolation chroot --network host --layers=false --format oci \
    -v "$HOST_CA:/etc/ssl/certs/ca-certificates.crt:ro" -f "$file" -t "$ref" "$@" "$context"
}

build_pause() {
  local hash
  hash=$(hash_inputs pause-v1 "@$HERE/pause" "$(go env GOVERSION)")
  fresh llmkube-pause "$hash" && { log "$PAUSE_REF: cached"; return; }
  log "$PAUSE_REF: building (static Go binary)"
  local t0=$SECONDS ctx="$WORK/pause-context"
  rm -rf "$ctx"; mkdir -p "$ctx"
  (cd "$HERE/pause" && CGO_ENABLED=0 GOFLAGS=-trimpath go build -ldflags "-s -w" -o "$ctx/pause" .)
  build_file "$PAUSE_REF" "$HERE/pause/Containerfile" "$ctx"
  save llmkube-pause "$PAUSE_REF" "$hash"
  log "$PAUSE_REF: built in $((SECONDS - t0)) s"
}

base_hash() { hash_inputs debootstrap-v1 "$DEBIAN_SUITE" "$DEBIAN_MIRROR" "$DEBIAN_PACKAGES"; }

build_base() {
  local hash; hash=$(base_hash)
  if fresh llmkube-debian "$hash"; then
    log "$BASE_REF: cached"; ensure_in_store llmkube-debian "$BASE_REF"; return
  fi
  log "$BASE_REF: debootstrap $DEBIAN_SUITE (minbase + ${DEBIAN_PACKAGES//,/ }) from $DEBIAN_MIRROR (~2 min)"
  local t0=$SECONDS rootfs="$WORK/rootfs"
  rm -rf "$rootfs"
  debootstrap --variant=minbase --include="$DEBIAN_PACKAGES" "$DEBIAN_SUITE" "$rootfs" "$DEBIAN_MIRROR" \
    > "$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log" >&2; exit 1; }
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*
  log "$BASE_REF: debootstrap done in $((SECONDS - t0)) s ($(du -sh "$rootfs" | cut -f1)); committing"
  local ctr
  ctr=$(bah from --quiet scratch)
  tar -C "$rootfs" -cf "$WORK/rootfs.tar" .
  bah add --quiet "$ctr" "$WORK/rootfs.tar" / >/dev/null
  bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash "$ctr"
  bah commit --quiet --format oci --rm "$ctr" "$BASE_REF" >/dev/null
  rm -rf "$rootfs" "$WORK/rootfs.tar"
  save llmkube-debian "$BASE_REF" "$hash"
  log "$BASE_REF: built in $((SECONDS - t0)) s"
}

python_hash() { hash_inputs "$(base_hash)" "@$HERE/python.Containerfile"; }

build_python() {
  build_base
  local hash; hash=$(python_hash)
  if fresh llmkube-python "$hash"; then
    log "$PYTHON_REF: cached"; ensure_in_store llmkube-python "$PYTHON_REF"; return
  fi
  log "$PYTHON_REF: building (apt-get install python3 python3-venv)"
  local t0=$SECONDS
  build_file "$PYTHON_REF" "$HERE/python.Containerfile" "$HERE" --build-arg "BASE_IMAGE=$BASE_REF"
  save llmkube-python "$PYTHON_REF" "$hash"
  log "$PYTHON_REF: built in $((SECONDS - t0)) s"
}

build_controller() {
  local hash
  # Everything the build context holds (.dockerignore lets in only these).
  hash=$(hash_inputs "$(python_hash)" "@$REPO/hack/image.sh" "@$REPO/Dockerfile" "@$REPO/.dockerignore" \
    "@$REPO/pyproject.toml" "@$REPO/README.md" "@$REPO/requirements" "@$REPO/llmkube" "@$REPO/manifests" "@$REPO/hack/build-k8s.sh")
  fresh llmkube "$hash" && { log "$CONTROLLER_REF: cached"; return; }
  build_python
  log "$CONTROLLER_REF: building from Dockerfile (BASE_IMAGE=$PYTHON_REF; pip installs the locked requirements from PyPI)"
  local t0=$SECONDS
  # pip inside the build verifies TLS against the mounted host bundle.
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$WORK/pip.conf"
  # What `make image` runs (hack/image.sh), in this script's buildah store and on the local base;
  # tagged with the version too, the name `make image` gives it (the newcomer test installs that).
  local version
  version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$REPO/llmkube/__init__.py")
  filtered "$CONTROLLER_REF" env CONTAINER_TOOL=buildah BASE_IMAGE="$PYTHON_REF" \
    IMAGE="$CONTROLLER_REF" EXTRA_TAGS="localhost/llmkube:$version" ARCHIVE="$IMAGES/llmkube.tar" \
    BUILDER_ARGS="--root $WORK/storage --runroot $WORK/runroot --storage-driver overlay" \
    BUILD_ARGS="--isolation chroot --network host --layers=false -v $HOST_CA:/etc/ssl/certs/ca-certificates.crt:ro -v $WORK/pip.conf:/etc/pip.conf:ro" \
    bash "$REPO/hack/image.sh" build
  echo "$hash" > "$IMAGES/llmkube.tar.inputs"
  log "$CONTROLLER_REF: archived as $IMAGES/llmkube.tar ($(du -h "$IMAGES/llmkube.tar" | cut -f1))"
  log "$CONTROLLER_REF: built in $((SECONDS - t0)) s"
}

build_curl() {
  local hash; hash=$(hash_inputs "$(base_hash)" "@$HERE/curl.Containerfile")
  fresh llmkube-curl "$hash" && { log "$CURL_REF: cached"; return; }
  build_base
  log "$CURL_REF: building"
  local t0=$SECONDS
  build_file "$CURL_REF" "$HERE/curl.Containerfile" "$HERE" --build-arg "BASE_IMAGE=$BASE_REF"
  save llmkube-curl "$CURL_REF" "$hash"
  log "$CURL_REF: built in $((SECONDS - t0)) s"
}

llama_source() {  # unpack vendor/llama.cpp of the pinned llama-cpp-python sdist; prints its parent
  local sdist_dir="$CACHE_ROOT/src" src="$WORK/llama-cpp-python-$LLAMA_CPP_PYTHON_VERSION" sdist
  sdist=$(ls "$sdist_dir"/llama[-_]cpp[-_]python-"$LLAMA_CPP_PYTHON_VERSION".tar.gz 2>/dev/null | head -1 || true)
  if [ -z "$sdist" ]; then
    log "llama-cpp-python $LLAMA_CPP_PYTHON_VERSION: downloading the sdist from PyPI (~76 MB)"
    mkdir -p "$sdist_dir"
    "$PYTHON" -m pip download --quiet --no-binary llama-cpp-python --no-deps \
      -d "$sdist_dir" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" >&2
    sdist=$(ls "$sdist_dir"/llama[-_]cpp[-_]python-"$LLAMA_CPP_PYTHON_VERSION".tar.gz | head -1)
  fi
  if [ ! -f "$src/llama.cpp/CMakeLists.txt" ]; then
    rm -rf "$src"; mkdir -p "$src"
    # <sdist>/vendor/llama.cpp/... -> $src/llama.cpp/...
    tar -xzf "$sdist" -C "$src" --strip-components=2 --wildcards '*/vendor/llama.cpp/*'
  fi
  echo "$src"
}

build_llama_server() {
  local hash
  hash=$(hash_inputs "$(base_hash)" "@$HERE/llama-server.Containerfile" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION")
  fresh llama-server "$hash" && { log "$LLAMA_REF: cached"; return; }
  build_base
  local src; src=$(llama_source)
  log "$LLAMA_REF: compiling llama-server from llama-cpp-python $LLAMA_CPP_PYTHON_VERSION's llama.cpp" \
    "with $JOBS jobs (~6 min on 2 cores)"
  local t0=$SECONDS
  build_file "$LLAMA_REF" "$HERE/llama-server.Containerfile" "$src" \
    --build-arg "BASE_IMAGE=$BASE_REF" --build-arg "JOBS=$JOBS"
  save llama-server "$LLAMA_REF" "$hash"
  rm -rf "$src"  # 200 MB of sources, unpacked again from the cached sdist if ever needed
  log "$LLAMA_REF: built in $((SECONDS - t0)) s"
}

# Called from the last line, which also exits: bash reads a script as it runs it, and this way a
# build that is running has read all of it, so editing the file cannot change what it does.
main() {
  local t_start=$SECONDS
  case "${1:-all}" in
    all) build_pause; build_curl; build_controller; build_llama_server ;;
    pause) build_pause ;;
    base) build_base ;;
    python) build_python ;;
    controller) build_controller ;;
    curl) build_curl ;;
    llama-server) build_llama_server ;;
    *) echo "usage: $0 [all|pause|base|python|controller|curl|llama-server]" >&2; exit 2 ;;
  esac
  # Build stages and replaced images are garbage once archived.
  bah rmi --prune >/dev/null 2>&1 || true
  log "done in $((SECONDS - t_start)) s; archives in $IMAGES ($(du -sh "$IMAGES" | cut -f1))"
}

main "$@"; exit
