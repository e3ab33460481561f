"""Shell scripts of the model downloader: the `model-downloader` init container of inference pods,
and the container of a Model's prefetch Job.

Every user-controlled value (URLs, paths, the Secret's keys) reaches the scripts through the
environment (plan/model/downloader.py): the script texts below are constants, so no Model or
InferenceService field can inject shell syntax, and curl gets each URL after `--url` (never an
option) and only http(s) (`--proto`). Credentials go to curl on its standard input (`-K -`), never
on its command line, where every process of the pod could read them.

DOWNLOAD_REMOTE stages every file of an http(s), hf://, s3:// or gs:// Model (`MODEL_FILES`: one
`<path below CACHE_DIR><TAB><URL>` line per file, the model file first):

* a file that is there is a cache hit: with refreshPolicy IfNotPresent no request is made for it;
  with OnChange (`ON_CHANGE=1`) its ETag is asked for first and it is fetched again only when the
  ETag differs from the one saved beside it (`.<name>.etag`); when the source cannot be reached, a
  cached copy is kept;
* one ranged request (`bytes=0-0`) per file first learns its size, its ETag and, from the Hugging
  Face Hub, its SHA-256 (`X-Linked-Etag` of an LFS file); a refusal is reported with the server's
  own words (S3's `<Code>`, the Hub's `X-Error-Code`);
* the file is written to `<name>.<etag digest>.part`, resumed where an interrupted download left
  it (`curl -C -`) if the source still has the same ETag, else started afresh; checked against the
  size, and against the SHA-256 when one is known (`MODEL_SHA256` for the model file, the Hub's
  for the others), fsync'ed, and renamed into place: a file under its own name is always whole;
* transient failures (timeouts, 408, 429, 5xx) are retried by curl with exponential backoff, and
  the container exits 1; a refusal (any other 4xx) or a checksum mismatch exits 3, which a
  prefetch Job fails on at once (its podFailurePolicy) instead of retrying;
* after a success no `.part` file is left in the Model's directory, whatever an earlier,
  interrupted download left there;
* progress every 5 seconds, `llmkube-download: <bytes> of <total> bytes (<n>%)`, which the
  controller reads into status, and a last line, also the container's termination message:
  `llmkube-download: done: <n> files, <bytes> bytes in <dir> (<d> downloaded, <h> cache hits)`.

An s3:// Model with `webIdentity` (or a pod that IRSA's webhook gave AWS_ROLE_ARN and
AWS_WEB_IDENTITY_TOKEN_FILE) has no keys of its own: the projected ServiceAccount token is sent to
STS (`AssumeRoleWithWebIdentity`, at AWS_ENDPOINT_URL_STS or the region's endpoint) in a POST body
read from the file (never on a command line), and the temporary keys it answers sign the requests
with their session token; they are renewed (the token file read again: the kubelet rotates it)
five minutes before they expire. EKS Pod Identity (AWS_CONTAINER_CREDENTIALS_FULL_URI and
AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE, which its webhook injects) is asked for the keys the same
way, its token sent from curl's standard input. Static keys (AWS_ACCESS_KEY_ID), when the Secret
has them, win, as in the AWS SDKs. STS's refusal is reported in its own words (`AccessDenied`,
`InvalidIdentityToken`) with exit 3; no answer or a 5xx with exit 1.

Two pods staging the same Model at once (replicas starting together) take turns on a lock file in
its directory (`flock`).
"""

# Custom CA bundle: the first regular file in the mounted ConfigMap (ConfigMap mounts also hold
# dot-prefixed bookkeeping entries, which `*` does not match).
CA_BUNDLE_PRELUDE = """\
for f in /custom-certs/*; do
  if [ -f "$f" ]; then export CURL_CA_BUNDLE="$f"; break; fi
done
"""

#: Exit codes: a refusal or a checksum mismatch will not fix itself (a Job does not retry it).
EXIT_TRANSIENT = 1
EXIT_PERMANENT = 3

# Cached mode with a local source: copy the host file into the shared cache once.
LOCAL_COPY = """\
set -eu
if [ -n "$CACHE_DIR" ]; then mkdir -p "$CACHE_DIR"; fi
if [ -f "$MODEL_PATH" ]; then
  echo "Model already cached at $MODEL_PATH"
else
  echo "Copying local model into $MODEL_PATH"
  cp /host-model/model.gguf "$MODEL_PATH.part"
  mv "$MODEL_PATH.part" "$MODEL_PATH"
fi
"""

DOWNLOAD_REMOTE = r"""set -u
# Group-writable: the pods of another service (or the prefetch Job) share the files through the
# pods' fsGroup.
umask 002
TAB=$(printf '\t')
mkdir -p "$CACHE_DIR" || exit 1
H="$CACHE_DIR/.llmkube-probe.headers"
B="$CACHE_DIR/.llmkube-probe.body"
R="$CACHE_DIR/.llmkube-result"
# (A lock file this pod may not write, on a cache it only reads, is no reason to stop.)
if command -v flock >/dev/null 2>&1 && { command exec 9>>"$CACHE_DIR/.llmkube.lock"; } 2>/dev/null; then
  flock 9
fi
say() { echo "llmkube-download: $*"; }
finish() {  # finish EXIT-CODE MESSAGE: the last line, also the termination message
  echo "llmkube-download: $2"
  log=${TERMINATION_LOG:-/dev/termination-log}
  if [ -e "$log" ]; then printf 'llmkube-download: %s\n' "$2" > "$log" 2>/dev/null; fi
  rm -f "$H" "$B" "$R"
  exit "$1"
}
transient_or_not() {  # the exit code for an HTTP status (000: no answer at all)
  case "$1" in 000|408|429|5??) echo 1 ;; *) echo 3 ;; esac
}
cfg() { printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g'; }
ID_KEY=; ID_SECRET=; ID_TOKEN=; ID_UNTIL=0
# An hour: every role allows that (its MaxSessionDuration is at least an hour); renewed 5 minutes
# before the end (a session of 10 minutes or less: when it ends).
ID_SECONDS=${LLMKUBE_WEB_IDENTITY_SECONDS:-3600}
case "$ID_SECONDS" in ''|*[!0-9]*) ID_SECONDS=3600 ;; esac
ID_MARGIN=300; [ "$ID_SECONDS" -gt 600 ] || ID_MARGIN=0
xml() { sed -n "s:.*<$1>\([^<]*\)</$1>.*:\1:p" "$B" 2>/dev/null | head -n 1; }
json() { tr -d '\n' < "$B" 2>/dev/null | sed -n "s/.*\"$1\" *: *\"\([^\"]*\)\".*/\1/p" | head -n 1; }
identity() {  # temporary keys from the pod's identity, when the Secret gives no static ones
  [ "$DOWNLOAD_KIND" = s3 ] && [ -z "${AWS_ACCESS_KEY_ID:-}" ] || return 0
  if [ -n "${AWS_ROLE_ARN:-}" ]; then
    web_identity
  elif [ -n "${AWS_CONTAINER_CREDENTIALS_FULL_URI:-}" ]; then
    pod_identity
  fi
}
pod_identity() {  # EKS Pod Identity: the node agent's keys for the pod, renewed likewise
  now=$(date +%s)
  [ "$now" -lt "$ID_UNTIL" ] && return 0
  file=${AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE:-}
  if [ -z "$file" ] || [ ! -r "$file" ] || [ ! -s "$file" ]; then
    finish 3 "failed: the pod identity token ${file:-(no token file named)} cannot be read"
  fi
  uri=$AWS_CONTAINER_CREDENTIALS_FULL_URI
  rm -f "$H" "$B"
  result=$(printf 'header = "Authorization: %s"\n' "$(cfg "$(cat "$file")")" | curl -K - -sS \
    --proto =http,https --connect-timeout 10 --retry 5 --retry-connrefused --retry-max-time 60 \
    -A llmkube-model-downloader -D "$H" -o "$B" -w '%{http_code} %{errormsg}' --url "$uri" 2>/dev/null)
  code=${result%% *}
  [ -f "$H" ] || : > "$H"
  if [ "$code" != 200 ]; then
    if [ "$code" = 000 ]; then why="no answer (${result#* })"; else why=$(server_error "$code"); fi
    finish "$(transient_or_not "$code")" "failed: the pod identity agent at $uri refused: $why"
  fi
  ID_KEY=$(json AccessKeyId); ID_SECRET=$(json SecretAccessKey); ID_TOKEN=$(json Token)
  rm -f "$H" "$B"
  if [ -z "$ID_KEY" ] || [ -z "$ID_SECRET" ]; then
    finish 1 "failed: the pod identity agent at $uri answered without credentials"
  fi
  ID_UNTIL=$((now + ID_SECONDS - ID_MARGIN))
  say "signed in with the pod identity (keys renewed in $((ID_SECONDS - ID_MARGIN)) s)"
}
web_identity() {  # temporary keys of AWS_ROLE_ARN for the web identity token, renewed before expiry
  now=$(date +%s)
  [ "$now" -lt "$ID_UNTIL" ] && return 0
  file=${AWS_WEB_IDENTITY_TOKEN_FILE:-}
  if [ -z "$file" ] || [ ! -r "$file" ] || [ ! -s "$file" ]; then
    finish 3 "failed: the web identity token ${file:-(AWS_WEB_IDENTITY_TOKEN_FILE is not set)} cannot be read"
  fi
  region=${AWS_REGION:-${AWS_DEFAULT_REGION:-us-east-1}}
  sts=${AWS_ENDPOINT_URL_STS:-https://sts.$region.amazonaws.com}
  rm -f "$H" "$B"
  result=$(curl -sS --proto =http,https --connect-timeout 30 --retry 5 --retry-connrefused \
    --retry-max-time 120 -A llmkube-model-downloader -D "$H" -o "$B" -w '%{http_code} %{errormsg}' \
    --data-urlencode Action=AssumeRoleWithWebIdentity --data-urlencode Version=2011-06-15 \
    --data-urlencode "RoleArn=$AWS_ROLE_ARN" \
    --data-urlencode "RoleSessionName=${AWS_ROLE_SESSION_NAME:-llmkube-model-downloader}" \
    --data-urlencode "DurationSeconds=$ID_SECONDS" --data-urlencode "WebIdentityToken@$file" \
    --url "${sts%/}/" 2>/dev/null)
  code=${result%% *}
  [ -f "$H" ] || : > "$H"
  if [ "$code" != 200 ]; then
    if [ "$code" = 000 ]; then why="no answer (${result#* })"; else why=$(server_error "$code"); fi
    finish "$(transient_or_not "$code")" \
      "failed: STS at $sts refused the web identity for $AWS_ROLE_ARN: $why"
  fi
  ID_KEY=$(xml AccessKeyId); ID_SECRET=$(xml SecretAccessKey); ID_TOKEN=$(xml SessionToken)
  rm -f "$H" "$B"
  if [ -z "$ID_KEY" ] || [ -z "$ID_SECRET" ]; then
    finish 1 "failed: STS at $sts answered without credentials for $AWS_ROLE_ARN"
  fi
  ID_UNTIL=$((now + ID_SECONDS - ID_MARGIN))
  say "signed in as $AWS_ROLE_ARN with the web identity token (keys renewed in $((ID_SECONDS - ID_MARGIN)) s)"
}
credentials() {  # curl's configuration (-K -): the Secret's keys never reach a command line
  case "$DOWNLOAD_KIND" in
    hf)
      if [ -n "${HF_TOKEN:-}" ]; then
        printf 'header = "Authorization: Bearer %s"\n' "$(cfg "$HF_TOKEN")"
      fi ;;
    s3)
      if [ -n "${AWS_ACCESS_KEY_ID:-}" ]; then
        printf 'user = "%s:%s"\n' "$(cfg "$AWS_ACCESS_KEY_ID")" "$(cfg "${AWS_SECRET_ACCESS_KEY:-}")"
        printf 'aws-sigv4 = "aws:amz:%s:s3"\n' "$(cfg "${AWS_REGION:-us-east-1}")"
        if [ -n "${AWS_SESSION_TOKEN:-}" ]; then
          printf 'header = "x-amz-security-token: %s"\n' "$(cfg "$AWS_SESSION_TOKEN")"
        fi
      elif [ -n "$ID_KEY" ]; then
        printf 'user = "%s:%s"\n' "$(cfg "$ID_KEY")" "$(cfg "$ID_SECRET")"
        printf 'aws-sigv4 = "aws:amz:%s:s3"\n' "$(cfg "${AWS_REGION:-us-east-1}")"
        printf 'header = "x-amz-security-token: %s"\n' "$(cfg "$ID_TOKEN")"
      fi ;;
  esac
}
fetch() {  # curl with the credentials and the options every request shares
  credentials | curl -K - -sS -L --max-redirs 10 --proto =http,https --proto-redir =http,https \
    --connect-timeout 30 -A llmkube-model-downloader "$@"
}
url_of() {
  if [ "$DOWNLOAD_KIND" = s3 ]; then
    endpoint=${AWS_ENDPOINT_URL:-https://s3.${AWS_REGION:-us-east-1}.amazonaws.com}
    printf '%s%s' "${endpoint%/}" "$1"
  elif [ "$DOWNLOAD_KIND" = gs ]; then
    endpoint=${GCS_ENDPOINT_URL:-https://storage.googleapis.com}
    printf '%s%s' "${endpoint%/}" "$1"
  else
    printf '%s' "$1"
  fi
}
header() {  # header NAME first|last: a header of the probe's answers (every redirect's included)
  tr -d '\r' < "$H" | awk -v name="$1" -v which="$2" '
    { i = index($0, ":"); if (i == 0) next
      if (tolower(substr($0, 1, i - 1)) != name) next
      if (which == "first" && found) next
      v = substr($0, i + 1); sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v); found = 1; value = v }
    END { if (found) print value }'
}
server_error() {  # the server's own words for a refusal: S3's <Code>/<Message>, the Hub's X-Error-*
  code=$(header x-error-code first)
  [ -n "$code" ] || code=$(sed -n 's:.*<Code>\([^<]*\)</Code>.*:\1:p' "$B" 2>/dev/null | head -n 1)
  text=$(header x-error-message first)
  # (XML escapes its quotes: MinIO says "expecting &#39;eu-central-1&#39;"; `&amp;` last.)
  [ -n "$text" ] || text=$(sed -n 's:.*<Message>\([^<]*\)</Message>.*:\1:p' "$B" 2>/dev/null | head -n 1 \
    | sed "s/&#39;/'/g; s/&apos;/'/g; s/&quot;/\"/g; s/&lt;/</g; s/&gt;/>/g; s/&amp;/\\&/g")
  [ -n "$text" ] || text=$(sed -n 's/.*"error" *: *"\([^"]*\)".*/\1/p' "$B" 2>/dev/null | head -n 1)
  [ -n "$text" ] || text=$(sed -n 's/.*"message" *: *"\([^"]*\)".*/\1/p' "$B" 2>/dev/null | head -n 1)
  printf 'HTTP %s%s%s' "$1" "${code:+ $code}" "${text:+: $text}" | tr -d '\000-\037' | cut -c 1-300
}
probe() {  # probe URL: P_CODE, P_SIZE, P_ETAG, P_SHA, P_RANGES, P_ERROR from one ranged request
  rm -f "$H" "$B"
  result=$(fetch -r 0-0 --max-filesize 1048576 -D "$H" -o "$B" -w '%{http_code} %{errormsg}' \
    --url "$1" 2>/dev/null)
  P_CODE=${result%% *}; P_SIZE=; P_ETAG=; P_SHA=; P_RANGES=0; P_ERROR=
  [ -f "$H" ] || : > "$H"
  case "$P_CODE" in
    206)
      P_RANGES=1
      P_SIZE=$(header content-range last | sed -n 's#^bytes [0-9]*-[0-9]*/\([0-9][0-9]*\)$#\1#p') ;;
    200)
      P_SIZE=$(header content-length last) ;;
    000)
      P_ERROR="no answer (${result#* })" ;;
    *)
      P_ERROR=$(server_error "$P_CODE") ;;
  esac
  linked=$(header x-linked-etag first)
  P_ETAG=${linked:-$(header etag last)}
  sha=$(printf '%s' "$linked" | sed 's#^W/##' | tr -d '"')
  if printf '%s' "$sha" | grep -Eq '^[0-9a-f]{64}$'; then P_SHA=$sha; fi
  rm -f "$H" "$B"
  [ -z "$P_ERROR" ]
}
etag_file() { printf '%s/.%s.etag' "$(dirname "$1")" "$(basename "$1")"; }
size_of() { { wc -c < "$1"; } 2>/dev/null || echo 0; }
durable() { sync "$1" 2>/dev/null || sync; }
progress() {  # progress PID DONE TOTAL PART: a line every 5 seconds while PID runs
  n=0
  while kill -0 "$1" 2>/dev/null; do
    sleep 1
    n=$((n + 1))
    [ $((n % 5)) -eq 0 ] || continue
    got=$(($2 + $(size_of "$4")))
    if [ "$3" -gt 0 ]; then say "$got of $3 bytes ($((got * 100 / $3))%)"; else say "$got bytes"; fi
  done
}

# What to fetch: every missing file, and with OnChange every file whose ETag changed.
count=0; hits=0; kept=0; total=0; todo=
while IFS="$TAB" read -r dest location; do
  [ -n "$dest" ] || continue
  count=$((count + 1))
  want=-
  if [ "$count" -eq 1 ] && [ -n "${MODEL_SHA256:-}" ]; then want=$MODEL_SHA256; fi
  path="$CACHE_DIR/$dest"
  if [ -f "$path" ] && [ -z "${ON_CHANGE:-}" ]; then
    say "cache hit: $dest"
    hits=$((hits + 1)); kept=$((kept + $(size_of "$path")))
    continue
  fi
  url=$(url_of "$location")
  identity
  if ! probe "$url"; then
    if [ -f "$path" ]; then
      say "$dest: $MODEL_SOURCE answered $P_ERROR; keeping the cached copy"
      hits=$((hits + 1)); kept=$((kept + $(size_of "$path")))
      continue
    fi
    finish "$(transient_or_not "$P_CODE")" "failed: $dest from $MODEL_SOURCE: $P_ERROR"
  fi
  if [ -f "$path" ] && [ -n "$P_ETAG" ] && [ "$(cat "$(etag_file "$path")" 2>/dev/null)" = "$P_ETAG" ]; then
    say "cache hit: $dest (unchanged upstream)"
    hits=$((hits + 1)); kept=$((kept + $(size_of "$path")))
    continue
  fi
  if [ "$want" = - ] && [ -n "$P_SHA" ]; then want=$P_SHA; fi
  todo="$todo$dest$TAB$url$TAB${P_SIZE:--}$TAB${P_ETAG:--}$TAB$want$TAB$P_RANGES
"
  total=$((total + ${P_SIZE:-0}))
done <<EOF
$MODEL_FILES
EOF
if [ -z "$todo" ]; then
  say "cache hit: all $count files are in $CACHE_DIR"
fi

done_bytes=0; downloaded=0
while IFS="$TAB" read -r dest url size etag want ranges; do
  [ -n "$dest" ] || continue
  path="$CACHE_DIR/$dest"
  mkdir -p "$(dirname "$path")" || finish 1 "failed: cannot create the directory of $dest"
  part="$path.$(printf '%s' "$etag" | sha256sum | cut -c 1-12).part"
  for old in "$path".*.part; do
    if [ -f "$old" ] && [ "$old" != "$part" ]; then rm -f "$old"; fi
  done
  if [ "$ranges" != 1 ]; then rm -f "$part"; fi
  if [ -f "$part" ]; then
    say "resuming $dest at $(size_of "$part") of $size bytes"
  else
    say "downloading $dest ($size bytes) from $MODEL_SOURCE" | sed 's/(- bytes)/(size unknown)/'
  fi
  if [ "$size" = - ] || [ "$(size_of "$part")" -lt "$size" ]; then
    identity
    fetch -f --retry 5 --retry-connrefused --retry-max-time 900 -C - -o "$part" \
      -w '%{http_code} %{errormsg}' --url "$url" > "$R" 2>/dev/null &
    pid=$!
    progress "$pid" "$done_bytes" "$total" "$part"
    wait "$pid"
    rc=$?
    result=$(cat "$R" 2>/dev/null)
    if [ "$rc" -ne 0 ]; then
      code=${result%% *}
      rm -f "$part"
      if [ "$code" = 000 ] || [ -z "$code" ]; then
        finish 1 "failed: $dest from $MODEL_SOURCE: ${result#* } (curl exit $rc)"
      fi
      finish "$(transient_or_not "$code")" "failed: $dest from $MODEL_SOURCE: HTTP $code"
    fi
  fi
  got=$(size_of "$part")
  if [ "$size" != - ] && [ "$got" -ne "$size" ]; then
    rm -f "$part"
    finish 1 "failed: $dest: $got of $size bytes arrived"
  fi
  if [ "$want" != - ]; then
    have=$(sha256sum "$part" | cut -d ' ' -f 1)
    if [ "$have" != "$want" ]; then
      rm -f "$part"
      finish 3 "failed: $dest has SHA-256 $have, not $want"
    fi
  fi
  durable "$part"
  mv -f "$part" "$path" || finish 1 "failed: cannot publish $dest"
  durable "$(dirname "$path")"
  if [ "$etag" != - ]; then
    printf '%s\n' "$etag" > "$(etag_file "$path")"
  else
    rm -f "$(etag_file "$path")"
  fi
  done_bytes=$((done_bytes + got))
  downloaded=$((downloaded + 1))
  say "$done_bytes of $total bytes ($dest done)"
done <<EOF
$todo
EOF

# An interrupted download's pieces do not outlive a success.
find "$CACHE_DIR" -name '*.part' -type f -exec rm -f {} + 2>/dev/null
bytes=$((kept + done_bytes))
finish 0 "done: $count files, $bytes bytes in $CACHE_DIR ($downloaded downloaded, $hits cache hits)"
"""


def downloader_script(*, local_source: bool, custom_ca: bool) -> str:
    body = LOCAL_COPY if local_source else DOWNLOAD_REMOTE
    return (CA_BUNDLE_PRELUDE if custom_ca else "") + body
