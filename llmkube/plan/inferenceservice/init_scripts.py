"""Shell scripts of the `model-downloader` init container: copy a local file, or fetch a remote one
(with an ETag check under `refreshPolicy: OnChange`), into the model's place in the pod.

Every user-controlled value (the source URL, the cache directory, the file path) reaches the
script through the environment variables MODEL_SOURCE, CACHE_DIR and MODEL_PATH: the script texts
below are constants, so no Model or InferenceService field can inject shell syntax.
Downloads go to a `.part` file that is renamed into place, so an interrupted fetch never leaves a
truncated file that a later pod would take for a cached model.
"""

# Custom CA bundle: the first regular file in the mounted ConfigMap (ConfigMap mounts also hold
# dot-prefixed bookkeeping entries, which `*` does not match).
CA_BUNDLE_PRELUDE = """\
for f in /custom-certs/*; do
  if [ -f "$f" ]; then export CURL_CA_BUNDLE="$f"; break; fi
done
"""

_MAKE_CACHE_DIR = """\
if [ -n "$CACHE_DIR" ]; then mkdir -p "$CACHE_DIR"; fi
"""

# Progress for people (`kubectl logs`, `llmkube logs --download`) and for the controller, which
# reads the last line into the service's status: curl's own meter redraws one line with carriage
# returns, which a log shows as garbage. `progress PID TOTAL` prints a line every few seconds
# while the download PID runs: "llmkube-download: <bytes> of <total> bytes (<n>%)".
PROGRESS_LINE_PREFIX = "llmkube-download:"
_PROGRESS = """\
total_of() {
  curl -sSLI --retry 3 "$MODEL_SOURCE" 2>/dev/null | tr -d '\\r' |
    awk 'tolower($1) == "content-length:" { n = $2 } END { print n + 0 }'
}
progress() {
  n=0
  while kill -0 "$1" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    [ $((n % 5)) -eq 0 ] || continue
    got=$(wc -c < "$MODEL_PATH.part" 2>/dev/null || echo 0)
    if [ "$2" -gt 0 ]; then
      echo "llmkube-download: $got of $2 bytes ($((got * 100 / $2))%)"
    else
      echo "llmkube-download: $got bytes"
    fi
  done
}
"""

# Cached mode with a local source: copy the host file into the shared cache once.
LOCAL_COPY = (
    "set -eu\n"
    + _MAKE_CACHE_DIR
    + """\
if [ -f "$MODEL_PATH" ]; then
  echo "Model already cached at $MODEL_PATH"
else
  echo "Copying local model into $MODEL_PATH"
  cp /host-model/model.gguf "$MODEL_PATH.part"
  mv "$MODEL_PATH.part" "$MODEL_PATH"
fi
"""
)

# refreshPolicy IfNotPresent: download only when the file is missing.
DOWNLOAD_IF_MISSING = (
    "set -eu\n"
    + _MAKE_CACHE_DIR
    + _PROGRESS
    + """\
if [ -f "$MODEL_PATH" ]; then
  echo "Model already cached at $MODEL_PATH"
else
  echo "Downloading $MODEL_SOURCE"
  TOTAL=$(total_of)
  curl -fsSL --retry 3 -o "$MODEL_PATH.part" "$MODEL_SOURCE" &
  progress $! "$TOTAL"
  wait $!
  echo "llmkube-download: $(wc -c < "$MODEL_PATH.part") of $TOTAL bytes (done)"
  mv "$MODEL_PATH.part" "$MODEL_PATH"
fi
"""
)

# refreshPolicy OnChange: a conditional GET against the ETag saved next to the model in a hidden
# `.<basename>.etag` file. 304 keeps the file, 200 replaces it; when the source is unreachable a
# cached copy is used (offline tolerant) and only a missing file is an error.
DOWNLOAD_ON_CHANGE = (
    "set -u\n"
    + _MAKE_CACHE_DIR
    + _PROGRESS
    + """\
ETAG_FILE="$(dirname "$MODEL_PATH")/.$(basename "$MODEL_PATH").etag"
set --
if [ -f "$MODEL_PATH" ] && [ -s "$ETAG_FILE" ]; then set -- --etag-compare "$ETAG_FILE"; fi
TOTAL=$(total_of)
curl -sSL --retry 3 -o "$MODEL_PATH.part" --etag-save "$ETAG_FILE.part" \\
  -w '%{http_code}' "$@" "$MODEL_SOURCE" > "$MODEL_PATH.code" &
progress $! "$TOTAL"
if wait $!; then CODE=$(cat "$MODEL_PATH.code"); else CODE="failed"; fi
rm -f "$MODEL_PATH.code"
case "$CODE" in
  304)
    rm -f "$MODEL_PATH.part" "$ETAG_FILE.part"
    echo "Model unchanged upstream, keeping $MODEL_PATH" ;;
  200)
    mv "$MODEL_PATH.part" "$MODEL_PATH"
    if [ -f "$ETAG_FILE.part" ]; then mv "$ETAG_FILE.part" "$ETAG_FILE"; fi
    echo "Downloaded $MODEL_SOURCE" ;;
  *)
    rm -f "$MODEL_PATH.part" "$ETAG_FILE.part"
    if [ -f "$MODEL_PATH" ]; then
      echo "Fetching $MODEL_SOURCE failed ($CODE); using the cached copy"
      exit 0
    fi
    echo "Fetching $MODEL_SOURCE failed ($CODE) and nothing is cached" >&2
    exit 1 ;;
esac
"""
)


def downloader_script(*, local_source: bool, on_change: bool, custom_ca: bool) -> str:
    body = LOCAL_COPY if local_source else DOWNLOAD_ON_CHANGE if on_change else DOWNLOAD_IF_MISSING
    return (CA_BUNDLE_PRELUDE if custom_ca else "") + body
