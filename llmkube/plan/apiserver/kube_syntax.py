"""The API server's syntax rules for names, keys and values (k8s.io/apimachinery
`pkg/util/validation` and `pkg/api/validate/content`, Kubernetes 1.37), as pure functions.

Each `*_errors` function returns the list of the server's own messages for a value (empty when
valid), so what the planner reports reads like what `kubectl` would print. The regular expressions
are the server's; they are matched whole (`fullmatch`: Go's `^...$` never matches before a trailing
newline, Python's `$` does). Lengths are in bytes, as Go's `len` counts them.
"""

import functools
import re

LABEL_VALUE_MAX_LENGTH = 63
QUALIFIED_NAME_MAX_LENGTH = 63
DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
MAX_USER_ID = 2**31 - 1

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character"
)
_LABEL_VALUE_FMT = f"({_LABEL_KEY_FMT})?"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_FMT = rf"{_DNS1123_LABEL_FMT}(\.{_DNS1123_LABEL_FMT})*"
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIG_MAP_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
_HTTP_HEADER_FMT = "[-A-Za-z0-9]+"
_HTTP_HEADER_MSG = "a valid HTTP header must consist of alphanumeric characters or '-'"
_SYSCTL_SEGMENT_FMT = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
SYSCTL_FMT = rf"({_SYSCTL_SEGMENT_FMT}[\./])*{_SYSCTL_SEGMENT_FMT}"
SYSCTL_MAX_LENGTH = 253


def _byte_length(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def _matches(pattern: str, value: str) -> bool:
    # Every planned object is checked, and its label keys, names and values mostly repeat from one
    # object to the next: a cached answer is ~0.2 us, a match through re's own cache ~1.3 us. Only
    # values as long as a valid name are kept: a huge one from a spec is neither valid nor repeated.
    if len(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        return re.fullmatch(pattern, value) is not None
    return _cached_match(pattern, value)


@functools.lru_cache(maxsize=4096)
def _cached_match(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def regex_error(message: str, pattern: str, *examples: str) -> str:
    """apimachinery's RegexError: the message, examples, and the regular expression used."""
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    shown = " or ".join(f"'{example}', " for example in examples)
    return f"{message} (e.g. {shown}regex used for validation is '{pattern}')"


def max_length_error(length: int) -> str:
    return f"must be no more than {length} characters"


def inclusive_range_error(low: int, high: int) -> str:
    return f"must be between {low} and {high}, inclusive"


def qualified_name_errors(value: str) -> list[str]:
    """A label key (or, lower-cased, an annotation key): `[DNS subdomain prefix/]name`."""
    errors: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors += [f"prefix part {message}" for message in dns1123_subdomain_errors(prefix)]
    else:
        return [
            "a valid label key "
            + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif _byte_length(name) > QUALIFIED_NAME_MAX_LENGTH:
        errors.append(f"name part {max_length_error(QUALIFIED_NAME_MAX_LENGTH)}")
    if not _matches(_LABEL_KEY_FMT, name):
        errors.append(
            "name part " + regex_error(_LABEL_KEY_MSG, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
        )
    return errors


def label_value_errors(value: str) -> list[str]:
    errors: list[str] = []
    if _byte_length(value) > LABEL_VALUE_MAX_LENGTH:
        errors.append(max_length_error(LABEL_VALUE_MAX_LENGTH))
    if not _matches(_LABEL_VALUE_FMT, value):
        errors.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errors


def dns1123_label_errors(value: str) -> list[str]:
    errors: list[str] = []
    if _byte_length(value) > DNS1123_LABEL_MAX_LENGTH:
        errors.append(max_length_error(DNS1123_LABEL_MAX_LENGTH))
    if not _matches(_DNS1123_LABEL_FMT, value):
        if _matches(_DNS1123_SUBDOMAIN_FMT, value):
            errors.append("must not contain dots")
        else:
            errors.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errors


def dns1123_subdomain_errors(value: str) -> list[str]:
    errors: list[str] = []
    if _byte_length(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errors.append(max_length_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _matches(_DNS1123_SUBDOMAIN_FMT, value):
        errors.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errors


def relaxed_env_var_name_errors(value: str) -> list[str]:
    """Environment variable names since Kubernetes 1.34 (RelaxedEnvironmentVariableValidation GA):
    any printable ASCII character but '='."""
    errors: list[str] = []
    if not value:
        errors.append("environment variable name must be non-empty")
    if any(not (0x20 <= ord(char) <= 0x7E) or char == "=" for char in value):
        errors.append(
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
        )
    return errors


def _chdir_prefix(value: str) -> list[str]:
    if value == ".":
        return ["must not be '.'"]
    if value == "..":
        return ["must not be '..'"]
    if value.startswith(".."):
        return ["must not start with '..'"]
    return []


def config_map_key_errors(value: str) -> list[str]:
    """A key of a ConfigMap or a Secret."""
    errors: list[str] = []
    if _byte_length(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errors.append(max_length_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not _matches(_CONFIG_MAP_KEY_FMT, value):
        errors.append(
            regex_error(_CONFIG_MAP_KEY_MSG, _CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME", "key-name")
        )
    return errors + _chdir_prefix(value)


def port_number_errors(port: int) -> list[str]:
    return [] if 1 <= port <= 65535 else [inclusive_range_error(1, 65535)]


def port_name_errors(port: str) -> list[str]:
    """An IANA service name: at most 15 of [-a-z0-9], at least one letter, no '--', no '-' at an end."""
    errors: list[str] = []
    if _byte_length(port) > 15:
        errors.append(max_length_error(15))
    if not _matches("[-a-z0-9]+", port):
        errors.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if re.search("[a-z]", port) is None:
        errors.append("must contain at least one letter (a-z)")
    if "--" in port:
        errors.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errors.append("must not begin or end with a hyphen")
    return errors


def http_header_name_errors(value: str) -> list[str]:
    if _matches(_HTTP_HEADER_FMT, value):
        return []
    return [regex_error(_HTTP_HEADER_MSG, _HTTP_HEADER_FMT, "X-Header-Name")]


def unix_id_errors(value: int) -> list[str]:
    """A Unix user or group id, as the container runtimes accept it (0 .. 2^31-1)."""
    return [] if 0 <= value <= MAX_USER_ID else [inclusive_range_error(0, MAX_USER_ID)]


def path_segment_name_errors(value: str) -> list[str]:
    """A name that can be one segment of a URL path (an HPA metric's name, for one)."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{char}'" for char in ("/", "%") if char in value]


def is_sysctl_name(value: str) -> bool:
    return _byte_length(value) <= SYSCTL_MAX_LENGTH and _matches(SYSCTL_FMT, value)


def annotations_size(annotations: dict[str, str]) -> int:
    """Bytes of keys and values, as the server adds them up against its 256 KiB limit."""
    return sum(_byte_length(key) + _byte_length(value) for key, value in annotations.items())
