"""Bounds on what a model source can put into a Model's status.

Everything in status that came from a source (the GGUF header's strings and numbers, an ETag, a
server's reason phrase or error inside a message) is the source owner's choice, and the source
owner may be hostile: a 4 MiB `general.name` made the status too large for etcd, a context length
of 2^64-1 too large for the API server's int64. The API server would refuse such a status, and a
refused status leaves the Model with none at all. So every value is bounded before it is planned:
text is cut with a visible marker, and a number the field cannot mean is left out.
"""

import hashlib

#: The largest integer the API server stores (an OpenAPI int64).
INT64_MAX = 2**63 - 1
#: What a cut text ends with, so nobody takes it for the whole value.
TRUNCATION_MARKER = "…[truncated"

#: status.gguf's strings (architecture, name, license): real ones are a few dozen characters.
MAX_GGUF_TEXT = 256
#: status.sourceETag: real ETags are quoted hashes, well under 100 characters.
MAX_ETAG = 256
#: a condition's message (the CRD allows 32768; one that names a URL and an error needs far less).
MAX_MESSAGE = 2048


def truncated(text: str, limit: int) -> str:
    """`text` if it has at most `limit` characters, else its first `limit` and a marker saying how
    long it was. Idempotent: a text already cut at `limit` comes back unchanged."""
    if len(text) <= limit or text[limit:].startswith(TRUNCATION_MARKER):
        return text
    return f"{text[:limit]}{TRUNCATION_MARKER}, {len(text)} characters]"


def prefix_bytes(limit: int) -> int:
    """How many leading bytes of a UTF-8 string hold at least `limit` characters (or all of it)."""
    return 4 * limit


def truncated_bytes(prefix: bytes, length: int, limit: int) -> str:
    """Text from the first bytes (at least `prefix_bytes(limit)` of them, or all) of a UTF-8 string
    `length` bytes long: decoded, cut at `limit` characters with a marker when anything is left out
    (`truncated` leaves the result as it is)."""
    text = prefix.decode("utf-8", errors="replace")
    if length <= len(prefix) and len(text) <= limit:
        return text
    return f"{text[:limit]}{TRUNCATION_MARKER}, {length} bytes]"


def bounded_etag(etag: str | None) -> str | None:
    """An ETag short enough for status. A longer one keeps a prefix and a digest of the whole, so
    two different long ETags still compare different (drift is decided by comparing them)."""
    if etag is None or len(etag) <= MAX_ETAG:
        return etag
    digest = hashlib.sha256(etag.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]
    return f"{etag[:64]}{TRUNCATION_MARKER}, {len(etag)} characters, sha256 {digest}]"


def in_range(value: object, *, high: int, low: int = 0) -> int | None:
    """`value` when it is an integer (not a bool) within [low, high], else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if low <= value <= high else None


def bounded_message(message: str) -> str:
    return truncated(message, MAX_MESSAGE)
