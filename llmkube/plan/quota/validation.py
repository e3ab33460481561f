"""What makes a GPUQuota unusable: both or neither of namespaceRef and selector, a negative count.

The admission policy (manifests/admission/gpuquota_policy.yaml) refuses the same at apply; this is
for clusters without it. An invalid quota is reported in its status and enforces nothing.
"""

from collections.abc import Mapping
from typing import Any


def quota_issues(spec: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, problem) for each mistake in a GPUQuota's spec, as the API server stores it."""
    issues: list[tuple[str, str]] = []
    has_ref = bool(spec.get("namespaceRef"))
    has_selector = spec.get("selector") is not None
    if has_ref and has_selector:
        issues.append(("spec", "exactly one of namespaceRef and selector, not both"))
    elif not has_ref and not has_selector:
        issues.append(("spec", "exactly one of namespaceRef and selector is required"))
    for field in ("gpuCount", "vramBytes"):
        value = spec.get(field)
        if isinstance(value, int) and value < 0:
            issues.append((f"spec.{field}", f"must not be negative (got {value})"))
    return issues
