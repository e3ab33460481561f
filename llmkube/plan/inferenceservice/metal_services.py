"""The Services a host agent may write EndpointSlices for, as the ConfigMap the admission policy
reads (manifests/admission/agent_endpointslices_policy.yaml).

The agent's RBAC lets it write EndpointSlices in every namespace (RBAC cannot name the Service a
slice belongs to); the policy holds its writes to the slices of llmkube's metal Services. A policy
cannot look other objects up, so the controller lists them in one ConfigMap of its own namespace,
`llmkube-metal-services`: data `<namespace>.<service>` -> the Service's uid (neither a namespace nor
a Service name has a dot, so the key reads one way only).

A Service is listed when it is what the controller made for a metal InferenceService:

* labelled managed-by llmkube, and without a selector (the controller gives every other Service a
  selector: a metal service's endpoints are its agents' slices);
* controlled by an InferenceService that exists with that uid, and named as that InferenceService's
  Service (a Service someone else made, or one left by an InferenceService that was deleted and
  made again under the name, is not);
* neither it nor its InferenceService is being deleted (its slices go with it).

The uid pins the entry to that one Service object: a slice must be owned by it, so an entry cannot
vouch for a Service made later under the same name. Without a metal service and without the
ConfigMap nothing is written (the policy refuses every agent write either way), so a fresh install
starts without a write.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from llmkube.api.base import KubeObject
from llmkube.api.constants import API_VERSION, ISVC_KIND, LABEL_MANAGED_BY, MANAGED_BY_VALUE
from llmkube.plan.inferenceservice.names import service_name

METAL_SERVICES_CONFIGMAP = "llmkube-metal-services"
#: What `kubectl describe` shows (the annotation the cluster's own ConfigMaps use for this).
DESCRIPTION_ANNOTATION = "kubernetes.io/description"
DESCRIPTION = (
    "The Services the llmkube controller made for metal InferenceServices (<namespace>.<service>: "
    "the Service's uid). The host agents may write EndpointSlices for these and no other "
    "(ValidatingAdmissionPolicy llmkube-agent-endpointslices). Kept by the controller: edits are undone."
)

Entries = dict[str, str]


def metal_service_key(namespace: str, name: str) -> str:
    return f"{namespace}.{name}"


def _meta(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (obj or {}).get("metadata") or {}


def selectorless(service: Mapping[str, Any] | None) -> bool:
    """A Service without a selector (an empty one selects nothing either)."""
    return service is not None and not (service.get("spec") or {}).get("selector")


def controlling_inference_service(service: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the InferenceService the Service's controller reference names, if any."""
    group = API_VERSION.split("/")[0]
    for ref in _meta(service).get("ownerReferences") or ():
        if (
            ref.get("controller") is True
            and ref.get("kind") == ISVC_KIND
            and str(ref.get("apiVersion", "")).split("/")[0] == group
            and ref.get("name")
        ):
            return str(ref["name"]), str(ref.get("uid") or "")
    return None


def metal_services(
    services: Iterable[Mapping[str, Any]], inference_services: Mapping[tuple[str, str], Mapping[str, Any]]
) -> Entries:
    """`<namespace>.<service>` -> uid of each Service made for a metal InferenceService, sorted.
    `inference_services`: (namespace, name) -> the InferenceService of that name, as cached."""
    found: Entries = {}
    for service in services:
        meta = _meta(service)
        namespace, name, uid = meta.get("namespace") or "", meta.get("name") or "", meta.get("uid") or ""
        if not (namespace and name and uid) or meta.get("deletionTimestamp"):
            continue
        if (meta.get("labels") or {}).get(LABEL_MANAGED_BY) != MANAGED_BY_VALUE or not selectorless(service):
            continue
        owner = controlling_inference_service(service)
        if owner is None or service_name(owner[0]) != name:
            continue
        isvc = _meta(inference_services.get((namespace, owner[0])))
        if not isvc.get("uid") or isvc.get("uid") != owner[1] or isvc.get("deletionTimestamp"):
            continue
        found[metal_service_key(namespace, name)] = uid
    return dict(sorted(found.items()))


def metal_services_configmap(
    namespace: str, entries: Mapping[str, str], *, exists: bool
) -> KubeObject | None:
    """The ConfigMap to apply in the controller's namespace, or None when there is nothing to write
    (no metal service, and no ConfigMap to empty)."""
    if not entries and not exists:
        return None
    configmap: KubeObject = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": METAL_SERVICES_CONFIGMAP,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/name": "llmkube", LABEL_MANAGED_BY: MANAGED_BY_VALUE},
            "annotations": {DESCRIPTION_ANNOTATION: DESCRIPTION},
        },
    }
    if entries:
        configmap["data"] = dict(entries)
    return configmap
