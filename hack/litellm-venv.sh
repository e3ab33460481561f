#!/usr/bin/env bash
# The benchmark-only environment of LiteLLM's proxy, the Python anchor bench/bench_router.py runs
# the same workload through. Never a dependency of the package or the image: its own venv, from
# PyPI, pinned, under the cache.
#
# Output: $LLMKUBE_CACHE_DIR/litellm-$LITELLM_VERSION (default ~/.cache/llmkube/...), with the
# `litellm` command in its bin/. Idempotent: a venv whose stamp names the pinned version is kept.
# Progress on stderr; the venv's directory on stdout.
#   bash hack/litellm-venv.sh
set -euo pipefail

# The newest release whose [proxy] extra installs from PyPI: from 1.108 on it requires a
# `litellm-proxy` distribution that is not published there.
LITELLM_VERSION="${LITELLM_VERSION:-1.106.12}"
CACHE_ROOT="${LLMKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmkube}"
VENV="$CACHE_ROOT/litellm-$LITELLM_VERSION"
PYTHON="${PYTHON:-python3}"

log() { printf '[litellm-venv %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

if [ -x "$VENV/bin/litellm" ] && [ "$(cat "$VENV/.version" 2>/dev/null)" = "$LITELLM_VERSION" ]; then
  log "litellm $LITELLM_VERSION: cached"
  echo "$VENV"
  exit 0
fi
log "litellm[proxy] $LITELLM_VERSION: installing into $VENV (about 6 minutes on 2 busy cores)"
t0=$SECONDS
# Installed in place (a venv's scripts name its path); the stamp, written last, marks it complete.
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
"$VENV/bin/python" -m pip install --quiet "litellm[proxy]==$LITELLM_VERSION" >&2
echo "$LITELLM_VERSION" > "$VENV/.version"
log "litellm $LITELLM_VERSION: installed in $((SECONDS - t0)) s"
echo "$VENV"
