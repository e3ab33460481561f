"""Lists the API server keys by a field (`listType: map`): an env var by its name, a container port
by number and protocol, a volume mount by its path... Two entries with the same key in one list make
the server refuse the whole object ("duplicate entries for key"), so every list we build from
generated entries and the user's has to be merged by that key, never concatenated.

`merge_by_key` is the merge (the user's entry replaces ours); `duplicate_keys` and
`duplicate_merge_keys` find what would still collide, for tests and for validation.
"""

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

from llmkube.api.base import KubeObject

KeyFields = tuple[str, ...]

#: The keyed lists of the pod spec and the container, and the fields that key them (the API's
#: `x-kubernetes-list-map-keys`, Kubernetes 1.37). A missing `protocol` is TCP, as the server
#: defaults it. Tolerations, envFrom and resizePolicy are atomic lists: repeats are legal there.
POD_SPEC_KEYS: dict[str, KeyFields] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "imagePullSecrets": ("name",),
    "hostAliases": ("ip",),
    "resourceClaims": ("name",),
    "schedulingGates": ("name",),
}
CONTAINER_KEYS: dict[str, KeyFields] = {
    "env": ("name",),
    "ports": ("containerPort", "protocol"),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
}
SERVICE_SPEC_KEYS: dict[str, KeyFields] = {"ports": ("port", "protocol")}
METADATA_KEYS: dict[str, KeyFields] = {"ownerReferences": ("uid",)}
_DEFAULTS = {"protocol": "TCP"}


def key_of(fields: KeyFields) -> Callable[[KubeObject], tuple[Hashable, ...]]:
    def key(item: KubeObject) -> tuple[Hashable, ...]:
        return tuple(_hashable(item.get(name, _DEFAULTS.get(name))) for name in fields)

    return key


def _hashable(value: Any) -> Hashable:
    return value if isinstance(value, Hashable) else repr(value)


def merge_by_key(
    generated: Iterable[KubeObject], user: Sequence[KubeObject], fields: KeyFields = ("name",)
) -> list[KubeObject]:
    """Our entries, minus those the user gives an entry of the same key for, then the user's in their
    order (so the user's win, and a `$(VAR)` of theirs can refer to one of ours). The user's own
    duplicates are left as they are: they are the user's mistake to be told about, not ours to pick."""
    key = key_of(fields)
    theirs = {key(item) for item in user}
    return [item for item in generated if key(item) not in theirs] + list(user)


def duplicate_keys(items: Iterable[KubeObject], fields: KeyFields = ("name",)) -> list[tuple[Hashable, ...]]:
    """The keys that more than one entry has, in first-seen order."""
    key = key_of(fields)
    seen: set[tuple[Hashable, ...]] = set()
    repeated: list[tuple[Hashable, ...]] = []
    for item in items:
        found = key(item)
        if found in seen and found not in repeated:
            repeated.append(found)
        seen.add(found)
    return repeated


def duplicate_merge_keys(obj: KubeObject) -> list[str]:
    """Every keyed list of a Deployment or a Service (the object, its pod spec and each container)
    that has two entries with one key, as `path: key` (empty when the server would accept the keys)."""
    found = _check(obj.get("metadata") or {}, METADATA_KEYS, "metadata")
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Service":
        return found + _check(spec, SERVICE_SPEC_KEYS, "spec")
    pod = ((spec.get("template") or {}).get("spec")) or {}
    found += _check(pod, POD_SPEC_KEYS, "spec.template.spec")
    for list_name in ("initContainers", "containers", "ephemeralContainers"):
        for index, container in enumerate(pod.get(list_name) or ()):
            found += _check(container, CONTAINER_KEYS, f"spec.template.spec.{list_name}[{index}]")
    return found


def _check(parent: KubeObject, keys: dict[str, KeyFields], path: str) -> list[str]:
    return [
        f"{path}.{list_name}: {dict(zip(fields, key, strict=True))}"
        for list_name, fields in keys.items()
        for key in duplicate_keys(parent.get(list_name) or (), fields)
    ]
