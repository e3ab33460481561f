"""Label and annotation syntax (apimachinery's IsQualifiedName and IsValidLabelValue), so that a
bad `podLabels`, `nodeSelector` or `podAnnotations` entry is reported naming the field and the key,
not as the API server's refusal of a Deployment the user never wrote.
"""

import re
from collections.abc import Mapping

MAX_NAME_LENGTH = 63
MAX_PREFIX_LENGTH = 253
_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a label or annotation key (`[prefix/]name`), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' is empty"
    if key.count("/") > 1:
        return "at most one '/' may separate a DNS prefix from the name"
    if not name:
        return "the name part is empty"
    if len(name) > MAX_NAME_LENGTH:
        return f"the name part is {len(name)} characters (at most {MAX_NAME_LENGTH})"
    if not _NAME.match(name):
        return "the name part must be letters, digits, '-', '_' or '.', starting and ending alphanumeric"
    if prefix and (len(prefix) > MAX_PREFIX_LENGTH or not _DNS_SUBDOMAIN.match(prefix)):
        return "the prefix must be a lowercase DNS subdomain (e.g. example.com)"
    return None


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a label value (empty, or up to 63 name characters), or None."""
    if not value:
        return None
    if len(value) > MAX_NAME_LENGTH:
        return f"is {len(value)} characters (at most {MAX_NAME_LENGTH})"
    if not _NAME.match(value):
        return "must be letters, digits, '-', '_' or '.', starting and ending alphanumeric"
    return None


def label_map_errors(
    path: str, labels: Mapping[str, str] | None, *, check_values: bool
) -> list[tuple[str, str]]:
    """(field, message) for each bad key (and, for labels, value) of a map."""
    errors: list[tuple[str, str]] = []
    for key, value in (labels or {}).items():
        problem = qualified_name_problem(key)
        if problem:
            errors.append((path, f'key "{key}": {problem}'))
        elif check_values and (problem := label_value_problem(value)):
            errors.append((path, f'value "{value}" of "{key}": {problem}'))
    return errors
