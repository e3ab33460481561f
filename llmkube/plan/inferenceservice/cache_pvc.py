"""The per-namespace model cache PVC `llmkube-model-cache`, named and labelled as the reference's.

Shared by every InferenceService of the namespace, so it has no owner and outlives them all; it is
planned only when a workload really mounts it (cached mode), never for a `pvc://` or metal Model,
for which the reference operator made one nobody used.
"""

from llmkube.api.base import KubeObject
from llmkube.api.constants import LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_NAME
from llmkube.apimachinery.quantity import canonical_quantity
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.names import CACHE_PVC_NAME
from llmkube.plan.inferenceservice.objects import compact

# The reference labels, kept as they are: tools that list cache PVCs match on them.
CACHE_PVC_LABELS = {
    LABEL_NAME: "llmkube",
    LABEL_COMPONENT: "model-cache",
    LABEL_MANAGED_BY: "llmkube-controller",
}


def cache_pvc_intent(namespace: str, config: OperatorConfig) -> KubeObject:
    """Raises QuantityError when the operator's cache size is not a quantity (checked by validation)."""
    access_mode = "ReadWriteMany" if config.model_cache_access_mode == "ReadWriteMany" else "ReadWriteOnce"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": CACHE_PVC_NAME, "namespace": namespace, "labels": dict(CACHE_PVC_LABELS)},
        "spec": compact(
            {
                "accessModes": [access_mode],
                "resources": {"requests": {"storage": canonical_quantity(config.model_cache_size)}},
                "storageClassName": config.model_cache_storage_class or None,
            }
        ),
    }
