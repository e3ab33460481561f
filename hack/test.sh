#!/usr/bin/env bash
# `make test`: the whole suite, in two passes, so that a new machine does not wait for every build
# before the first test.
#
#   1. in the background, at the lowest CPU and I/O priority: `make tools node-prereqs` (the release
#      tools, the node's packages, binaries and images: some 20 minutes of compiling on 2 cores when
#      nothing is cached, nothing when everything is);
#   2. meanwhile, every test that needs only the control plane (`-m "not tools"`): they wait on the
#      API server much of the time, and the builds get what they leave;
#   3. once the builds are done, the tests that need them (`-m tools`: the node tier, monitoring,
#      GitOps, the install tests, S3).
#
# Arguments go to both pytest runs (`make test PYTEST_ARGS="-x tests/unit"`); a pass that selects no
# test is not a failure. Exits non-zero when a build or either pass fails.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
CACHE_ROOT="${LLMKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmkube}"
LOG="$CACHE_ROOT/logs/builds-$(date +%Y%m%d-%H%M%S).log"
mkdir -p "$(dirname "$LOG")"
log() { printf '[test %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

t0=$SECONDS
low_priority=(nice -n 19)
command -v ionice >/dev/null && low_priority+=(ionice -c 3)
"${low_priority[@]}" make --no-print-directory tools node-prereqs >"$LOG" 2>&1 &
builds=$!
log "building the release tools and the node tier in the background (log: $LOG)"

passed() {  # pytest's exit code: 0, or 5 (nothing selected: PYTEST_ARGS chose other tests)
  [ "$1" = 0 ] || [ "$1" = 5 ]
}

# A test of this pass that finds a build missing fails (tests/tools.py without_build): it should
# have been marked `tools`, and a skip would hide it.
LLMKUBE_BUILDS_PENDING=1 "$PYTHON" -m pytest -m "not tools" "$@"
first=$?
log "tests without the builds: exit $first after $((SECONDS - t0)) s; waiting for the builds"

wait "$builds"
built=$?
grep -E '^\[(build-[a-z]+|node-prereqs)[^]]*\] (done|ready)' "$LOG" >&2 || true
if [ "$built" != 0 ]; then
  tail -n 40 "$LOG" >&2
  log "the background builds failed (exit $built): see $LOG"
  exit "$built"
fi
log "builds done after $((SECONDS - t0)) s"

"$PYTHON" -m pytest -m tools "$@"
second=$?
log "tests with the builds: exit $second; $((SECONDS - t0)) s in all"

passed "$first" && passed "$second" && exit 0
passed "$first" || exit "$first"
exit "$second"
