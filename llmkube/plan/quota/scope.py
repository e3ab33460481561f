"""Which namespaces a GPUQuota covers, as the reference decides it: `namespaceRef` names one;
`selector` matches namespaces by their labels (metav1.LabelSelector semantics). A quota in any
namespace may cover any namespace: creating GPUQuotas is an administrator's right (docs/gpu-quota.md).
"""

from collections.abc import Mapping
from typing import Any


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: every matchLabels pair and every matchExpressions requirement hold; an
    empty selector matches everything. An unknown operator matches nothing (the schema's enum
    refuses one anyway)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for requirement in selector.get("matchExpressions") or ():
        key = str(requirement.get("key") or "")
        operator = requirement.get("operator")
        values = set(requirement.get("values") or ())
        present = key in labels
        if operator == "In":
            ok = present and labels[key] in values
        elif operator == "NotIn":
            ok = not present or labels[key] not in values
        elif operator == "Exists":
            ok = present
        elif operator == "DoesNotExist":
            ok = not present
        else:
            ok = False
        if not ok:
            return False
    return True


def covers(spec: Mapping[str, Any], namespace: str, namespace_labels: Mapping[str, str] | None) -> bool:
    """Whether a quota's spec covers a namespace (with its labels; None: the namespace is not known,
    so only a namespaceRef can cover it)."""
    ref = spec.get("namespaceRef")
    if ref:
        return bool(ref == namespace)
    selector = spec.get("selector")
    if isinstance(selector, Mapping) and namespace_labels is not None:
        return selector_matches(selector, namespace_labels)
    return False
