"""Label and annotation syntax, so that a bad `podLabels`, `nodeSelector` or `podAnnotations` entry
is reported naming the field and the key, not as the API server's refusal of a Deployment the user
never wrote.

Whether a key or value is valid is decided by `kube_syntax` (apimachinery's IsQualifiedName and
IsValidLabelValue, ported once); this module only says *why* in plain words.
"""

from collections.abc import Mapping

from llmkube.plan.apiserver.kube_syntax import (
    LABEL_VALUE_MAX_LENGTH,
    QUALIFIED_NAME_MAX_LENGTH,
    dns1123_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)

_LETTERS = "must be letters, digits, '-', '_' or '.', starting and ending alphanumeric"


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a label or annotation key (`[prefix/]name`), or None."""
    if not qualified_name_errors(key):
        return None
    prefix, slash, name = key.rpartition("/")
    if slash and not prefix:
        return "the prefix before '/' is empty"
    if key.count("/") > 1:
        return "at most one '/' may separate a DNS prefix from the name"
    if not name:
        return "the name part is empty"
    if len(name.encode()) > QUALIFIED_NAME_MAX_LENGTH:
        return f"the name part is {len(name.encode())} characters (at most {QUALIFIED_NAME_MAX_LENGTH})"
    if prefix and dns1123_subdomain_errors(prefix):
        return "the prefix must be a lowercase DNS subdomain (e.g. example.com)"
    return f"the name part {_LETTERS}"


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a label value (empty, or up to 63 name characters), or None."""
    if not label_value_errors(value):
        return None
    if len(value.encode()) > LABEL_VALUE_MAX_LENGTH:
        return f"is {len(value.encode())} characters (at most {LABEL_VALUE_MAX_LENGTH})"
    return _LETTERS


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
