"""JSON that a YAML parser reads back unchanged: the body of a server-side apply.

The API server reads an `application/apply-patch+yaml` body with a YAML parser, and JSON is YAML
except for two things: YAML refuses some characters outright wherever they appear, even inside a
quoted string (DEL, the C1 controls, U+FFFE and U+FFFF), and it reads NEL, U+2028 and U+2029 as line
breaks, which a quoted string folds into a space. JSON passes them all through, so an annotation
value holding one would make every apply fail with `400 error converting YAML to JSON: control
characters are not allowed`, or be stored changed. Written as `\\uXXXX` escapes instead, which JSON and YAML
read alike, they arrive intact. (orjson already escapes the C0 controls; the JSON structure itself
is ASCII, so only string contents are ever touched.)
"""

import re
from typing import Any

import orjson

__all__ = ["dumps"]

# Outside YAML's printable set (#x9 #xA #xD [#x20-#x7E] #x85 [#xA0-#xD7FF] [#xE000-#xFFFD] [#x10000-]),
# and YAML 1.1's line breaks other than CR and LF (NEL, LS, PS), which a quoted scalar would fold.
_NOT_YAML_PRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff]")


def dumps(value: Any) -> bytes:
    encoded = orjson.dumps(value)
    if encoded.isascii() and b"\x7f" not in encoded:
        return encoded  # the common case: nothing to escape
    escaped = _NOT_YAML_PRINTABLE.sub(lambda match: f"\\u{ord(match.group()):04x}", encoded.decode())
    return escaped.encode()
