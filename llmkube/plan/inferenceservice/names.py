"""Names and labels of everything planned for an InferenceService (docs/compatibility.md).

Clients match on these, so they follow the reference exactly: the Deployment and HPA carry the raw
service name, the Service the name with dots replaced by dashes (a Service name is a DNS label).
"""

from llmkube.api.constants import (
    LABEL_APP,
    LABEL_MANAGED_BY,
    LABEL_MODEL,
    LABEL_RUNTIME,
    LABEL_SERVICE,
    MANAGED_BY_VALUE,
)

CACHE_PVC_NAME = "llmkube-model-cache"
# Label values and Service names are limited to 63 characters.
MAX_LABEL_VALUE_LENGTH = 63


def service_name(isvc_name: str) -> str:
    return isvc_name.replace(".", "-")


def selector_labels(isvc_name: str) -> dict[str, str]:
    """The stable, immutable Deployment selector: no model label, so `modelRef` stays mutable (with
    it a change failed as "field is immutable": https://github.com/defilantech/LLMKube/issues/301)."""
    return {LABEL_APP: isvc_name, LABEL_SERVICE: isvc_name}


def workload_labels(isvc_name: str, model_ref: str, runtime: str) -> dict[str, str]:
    """The four reference labels, on the Deployment and on its pod template."""
    return {
        LABEL_APP: isvc_name,
        LABEL_MODEL: model_ref,
        LABEL_SERVICE: isvc_name,
        LABEL_RUNTIME: runtime,
    }


def managed(labels: dict[str, str]) -> dict[str, str]:
    """Owned objects also carry managed-by, which scopes the controller's informers."""
    return {**labels, LABEL_MANAGED_BY: MANAGED_BY_VALUE}
