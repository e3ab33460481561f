#!/usr/bin/env bash
# `make test`: the whole suite, in three passes, so that a new machine does not wait for every
# build before the first test.
#
#   in the background, at the lowest CPU and I/O priority, one after the other: `make node-prereqs`
#   (the node's packages, binaries and images: some 7 minutes of compiling on 2 cores when nothing
#   is cached), then `make tools` (the release tools, Prometheus, MinIO: some 14);
#
#   1. meanwhile, every test that needs neither (-m "not tools and not node_prereqs": unit,
#      integration, e2e, faults): they wait on the API server much of the time, and the builds get
#      what they leave;
#   2. once the node tier is built, its tests that need no tool (-m "node_prereqs and not tools":
#      most of the node tier, and the API-server and e2e modules that run its llama-server), while
#      the tools finish building;
#   3. once the tools are built, every test that needs them (-m tools: the install tests,
#      monitoring, GitOps, S3, and the node tier's helm, Prometheus and MinIO modules).
#
# The node tier goes first because its tests take the longest: with the tools first, the node's
# images built while the few tests of the tools ran, and its tests began some 7 minutes later.
#
# Arguments go to every pytest run (`make test PYTEST_ARGS="-x tests/unit"`); a pass that selects no
# test is not a failure. Exits non-zero when a build or a pass fails.
set -uo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-.venv/bin/python}"
CACHE_ROOT="${LLMKUBE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/llmkube}"
RUN="$CACHE_ROOT/logs/test-$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$RUN"
log() { printf '[test %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

t0=$SECONDS
# The builds in a session of their own, so that an interrupted run stops them too (kill the group).
setsid bash -c '
  low=(nice -n 19); command -v ionice >/dev/null && low+=(ionice -c 3)
  for target in node-prereqs tools; do
    "${low[@]}" make --no-print-directory "$target" >"$1/$target.log" 2>&1
    echo $? >"$1/$target.rc"
  done' builds "$RUN" &
builds=$!
trap 'kill -- -"$builds" 2>/dev/null' EXIT
log "building the node tier, then the release tools, in the background (logs: $RUN)"

status=0
phases=()  # "name: seconds", printed together at the end
passed() {  # pytest's exit code: 0, or 5 (nothing selected: PYTEST_ARGS chose other tests)
  [ "$1" = 0 ] || [ "$1" = 5 ]
}
pass() {  # pass NAME MARKERS [env...]: one pytest run; its failure is remembered, the others run on
  local name=$1 markers=$2 rc start=$SECONDS
  shift 2
  # --durations: where the time of a pass goes, for whoever makes it shorter next
  env "$@" "$PYTHON" -m pytest -m "$markers" --durations=15 "${PYTEST_ARGS[@]}"
  rc=$?
  log "$name: exit $rc after $((SECONDS - t0)) s"
  phases+=("$(printf '%-36s %5d s  (exit %s)' "$name" $((SECONDS - start)) "$rc")")
  passed "$rc" || status=$rc
}
built() {  # built NAME: wait for that background build; 0 when it succeeded
  local name=$1 rc
  while [ ! -f "$RUN/$name.rc" ]; do
    kill -0 "$builds" 2>/dev/null || break
    sleep 2
  done
  rc=$(cat "$RUN/$name.rc" 2>/dev/null || echo 1)
  grep -E '^\[(build-[a-z]+|node-prereqs)[^]]*\] (done|ready)' "$RUN/$name.log" >&2 || true
  if [ "$rc" != 0 ]; then
    tail -n 40 "$RUN/$name.log" >&2
    log "make $name failed (exit $rc): see $RUN/$name.log"
    return 1
  fi
  log "make $name done after $((SECONDS - t0)) s"
  phases+=("$(printf '%-36s %5s    (done at %d s)' "build: make $name" "" $((SECONDS - t0)))")
}
PYTEST_ARGS=("$@")

# A test of a pass that finds a build missing fails (tests/tools.py without_build): it should have
# been marked, and a skip would hide it.
pass "tests that need no build" "not tools and not node_prereqs" LLMKUBE_BUILDS_PENDING=1
if built node-prereqs; then
  pass "tests that need the node tier" "node_prereqs and not tools" LLMKUBE_BUILDS_PENDING=1
else
  status=1
fi
# The tools build after the node tier: waiting for them also waits for it, whatever became of it.
if built tools; then
  pass "tests that need the tools" "tools"
else
  status=1
fi
log "the phases:"
for phase in "${phases[@]}"; do printf '  %s\n' "$phase" >&2; done
log "$((SECONDS - t0)) s in all"
exit "$status"
