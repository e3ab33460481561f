"""The per-service model cache (`--model-storage=per-service`): one claim for each InferenceService.

The claim is named after the service (`<name>-model-cache`, or a shortened name with a hash when
that is not a DNS label), owned by it (the garbage collector deletes it with the service) and
ReadWriteOnce. Its size is decided once, when it is created, in this order:

  the annotation `inference.llmkube.dev/model-cache-size` on the service (at most the maximum);
  `--service-cache-size`, when the operator set one;
  otherwise the Model's measured size (status.size) with a quarter of headroom, rounded up to a
  whole GiB (at least 1Gi) and bounded by `--max-service-cache-size`; the maximum itself when
  the Model's size is not known.

A Model larger than the maximum, or than the size asked for, fails the service naming both sizes.
The controller never resizes a claim it created (many storage classes cannot, and a shrink is
refused by the API server): when the size asked for differs from the claim's, the service says so
in its SpecValid condition and an Event, and keeps the claim it has. A Model that outgrew the
claim fails the service, saying to delete the claim so that it is made again at the new size.

ReadWriteOnce lets every pod of one node mount the claim, and no pod of another node: a service
that may run more than one replica is warned (not refused, nor moved to another storage: on one
node, or with its pods kept together, it works) that replicas on other nodes will not start.
"""

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from llmkube.api.base import KubeObject
from llmkube.api.constants import LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_SERVICE, MANAGED_BY_VALUE
from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.apimachinery.quantity import QuantityError, canonical_quantity, parse_quantity
from llmkube.plan.apiserver.kube_syntax import dns1123_label_errors
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.names import MAX_LABEL_VALUE_LENGTH
from llmkube.plan.inferenceservice.objects import compact, owner_reference
from llmkube.plan.model.size import parse_size

CACHE_SIZE_ANNOTATION = "inference.llmkube.dev/model-cache-size"
ANNOTATION_FIELD = f"metadata.annotations[{CACHE_SIZE_ANNOTATION}]"
OPERATOR_FIELD = "operator --model-storage=per-service"
CLAIM_SUFFIX = "-model-cache"
# Labels of every per-service claim (the controller's cache of them selects on the first two).
SERVICE_CACHE_COMPONENT = "service-model-cache"
SERVICE_CACHE_LABELS = {LABEL_MANAGED_BY: MANAGED_BY_VALUE, LABEL_COMPONENT: SERVICE_CACHE_COMPONENT}
SERVICE_CACHE_SELECTOR = ",".join(f"{key}={value}" for key, value in SERVICE_CACHE_LABELS.items())
# Event reasons of the two warnings.
CACHE_NOT_RESIZED = "ModelCacheNotResized"
CACHE_NOT_SHARED = "ModelCacheNotShared"

_GIB = 1024**3
_HEADROOM = Fraction(5, 4)
_HASH_LENGTH = 8


def service_cache_claim_name(service: str) -> str:
    """`<service>-model-cache` when that is a DNS label (63 characters at most, no dots); else the
    service's name made label-safe and cut short, with a hash of the whole name so two services
    never share a claim."""
    plain = f"{service}{CLAIM_SUFFIX}"
    if not dns1123_label_errors(plain):
        return plain
    digest = hashlib.sha256(service.encode()).hexdigest()[:_HASH_LENGTH]
    room = MAX_LABEL_VALUE_LENGTH - len(CLAIM_SUFFIX) - _HASH_LENGTH - 1
    safe = "".join(c if c.isalnum() and c.isascii() else "-" for c in service.lower())[:room].strip("-")
    return f"{safe}-{digest}{CLAIM_SUFFIX}" if safe else f"{digest}{CLAIM_SUFFIX}"


@dataclass(frozen=True)
class CacheWarning:
    field: str
    message: str
    reason: str


@dataclass(frozen=True)
class CacheProblem:
    field: str
    message: str


@dataclass(frozen=True)
class ServiceCache:
    claim_name: str
    size: str  # canonical quantity: what the claim is created with (or was: `create` False)
    create: bool  # False when the claim exists: it is never changed
    warnings: tuple[CacheWarning, ...] = ()


def _bytes(quantity: str) -> int:
    return math.ceil(parse_quantity(quantity).value)


@dataclass(frozen=True)
class _Asked:
    size: str  # canonical quantity
    origin: str  # where it comes from, in the words of a message
    field: str  # the field a problem or warning about it names


def _asked_size(
    annotations: Mapping[str, str], config: OperatorConfig, model_bytes: int | None, maximum: int
) -> _Asked | CacheProblem:
    annotated = annotations.get(CACHE_SIZE_ANNOTATION)
    if annotated is not None:
        text = annotated.strip()
        try:
            value = parse_quantity(text).value
        except QuantityError:
            return CacheProblem(ANNOTATION_FIELD, f'"{annotated}" is not a quantity (for example 20Gi)')
        if value <= 0:
            return CacheProblem(ANNOTATION_FIELD, f'"{annotated}" must be more than zero')
        if value > maximum:
            return CacheProblem(
                ANNOTATION_FIELD,
                f"asks for {text}, more than a service may have "
                f"({config.max_service_cache_size}, --max-service-cache-size)",
            )
        return _Asked(canonical_quantity(text), "the annotation", ANNOTATION_FIELD)
    if config.service_cache_size:
        return _Asked(canonical_quantity(config.service_cache_size), "--service-cache-size", OPERATOR_FIELD)
    most = canonical_quantity(config.max_service_cache_size)
    maximum_size = _Asked(most, "--max-service-cache-size", OPERATOR_FIELD)
    if model_bytes is None:
        return maximum_size  # nothing measured to size it by
    wanted = f"{max(1, math.ceil(model_bytes * _HEADROOM / _GIB))}Gi"
    if _bytes(wanted) > maximum:
        return maximum_size
    return _Asked(wanted, "the model's size and a quarter", OPERATOR_FIELD)


def _claim_size(claim: KubeObject) -> str:
    requests = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
    value = requests.get("storage")
    return value if isinstance(value, str) else ""


def _max_replicas(isvc: InferenceService) -> tuple[int, str]:
    spec = isvc.spec
    if spec.autoscaling is not None:
        return spec.autoscaling.max_replicas, "spec.autoscaling.maxReplicas"
    return (spec.replicas if spec.replicas is not None else 1), "spec.replicas"


def plan_service_cache(
    isvc: InferenceService, model: Model, config: OperatorConfig, live_claim: KubeObject | None
) -> ServiceCache | CacheProblem:
    """The claim the service's pods mount, and what the service is told about it. Raises nothing:
    the operator's quantities were checked when the controller started."""
    name = service_cache_claim_name(isvc.metadata.name or "")
    maximum = _bytes(config.max_service_cache_size)
    model_size = model.status.size if model.status else None
    model_bytes = parse_size(model_size)
    if model_bytes is not None and model_bytes > maximum:
        return CacheProblem(
            "model.status.size",
            f"the model is {model_size}, more than a per-service cache may hold "
            f"({config.max_service_cache_size}, --max-service-cache-size): raise the maximum or use "
            "another --model-storage",
        )
    asked = _asked_size(isvc.metadata.annotations or {}, config, model_bytes, maximum)
    if isinstance(asked, CacheProblem):
        return asked
    warnings: list[CacheWarning] = []
    replicas, replicas_field = _max_replicas(isvc)
    if replicas > 1:
        warnings.append(
            CacheWarning(
                replicas_field,
                f"{replicas} replicas share the ReadWriteOnce claim {name}: pods on another node than "
                "the one that mounted it cannot start; for replicas on several nodes use "
                "--model-storage=ephemeral or a ReadWriteMany namespace cache",
                CACHE_NOT_SHARED,
            )
        )
    if live_claim is None:
        if model_bytes is not None and model_bytes > _bytes(asked.size):
            return CacheProblem(
                asked.field,
                f"the model is {model_size}, more than {asked.size} ({asked.origin}), the size of "
                f"claim {name}",
            )
        return ServiceCache(name, asked.size, create=True, warnings=tuple(warnings))
    live = _claim_size(live_claim)
    try:
        live_bytes: int | None = _bytes(live)
    except QuantityError:
        live_bytes = None
    if model_bytes is not None and live_bytes is not None and model_bytes > live_bytes:
        return CacheProblem(
            "model.status.size",
            f"the model is {model_size}, more than claim {name} holds ({live}); the controller never "
            "resizes a claim: delete it and it is made again at the size asked for",
        )
    if live_bytes != _bytes(asked.size):
        warnings.append(
            CacheWarning(
                asked.field,
                f"asks for {asked.size} ({asked.origin}), but claim {name} was made with "
                f"{live or 'no size'}: the controller never resizes a claim; delete it (the "
                "service's pods stopped) and it is made again at the size asked for",
                CACHE_NOT_RESIZED,
            )
        )
    return ServiceCache(name, live or asked.size, create=False, warnings=tuple(warnings))


def service_cache_intent(isvc: InferenceService, cache: ServiceCache, config: OperatorConfig) -> KubeObject:
    """The claim as it is created (and never changed afterwards)."""
    labels = {**SERVICE_CACHE_LABELS, LABEL_SERVICE: isvc.metadata.name or ""}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": cache.claim_name,
            "namespace": isvc.metadata.namespace or "",
            "labels": labels,
            "ownerReferences": [owner_reference(isvc)],
        },
        "spec": compact(
            {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": cache.size}},
                "storageClassName": config.model_cache_storage_class or None,
            }
        ),
    }
