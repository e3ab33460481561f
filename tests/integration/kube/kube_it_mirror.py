"""A trivial controller built on llmkube.kube, used to prove the machinery end to end: for every
ConfigMap labelled ``mirror=yes`` it maintains ``<name>-mirror`` with the same data."""

from __future__ import annotations

from typing import Any

from llmkube.kube.control import Watch, enqueue_owner
from llmkube.kube.resource import CONFIG_MAPS
from llmkube.kube.types import ObjectKey
from llmkube.manager import Manager

CONTROLLER = "configmap-mirror"
SOURCE_SELECTOR = "mirror=yes"
MIRROR_OF = "llmkube.test/mirror-of"


def mirror_name(source: str) -> str:
    return f"{source}-mirror"


def desired_mirror(source: dict[str, Any]) -> dict[str, Any]:
    meta = source["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": mirror_name(meta["name"]),
            "namespace": meta["namespace"],
            "labels": {MIRROR_OF: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": dict(source.get("data") or {}),
    }


def setup_mirror(manager: Manager, *, workers: int = 2) -> None:
    sources = manager.informer(CONFIG_MAPS, label_selector=SOURCE_SELECTOR)
    mirrors = manager.informer(CONFIG_MAPS, label_selector=MIRROR_OF)

    async def reconcile(key: ObjectKey) -> None:
        source = sources.store.get_object(key.namespace, key.name)
        observed = mirrors.store.get_object(key.namespace, mirror_name(key.name))
        if source is None:
            # No garbage collector in the api tier (and none needed): delete what we own.
            if observed is not None and observed["metadata"].get("labels", {}).get(MIRROR_OF) == key.name:
                await manager.client.delete(
                    CONFIG_MAPS, mirror_name(key.name), key.namespace, uid=observed["metadata"]["uid"]
                )
            return
        result = await manager.applier.apply(CONFIG_MAPS, desired_mirror(source), observed)
        if result.changed:
            manager.recorder.event(
                source, "Normal", "Mirrored", f"{result.outcome.value} {mirror_name(key.name)}"
            )

    manager.add_controller(
        CONTROLLER,
        reconcile,
        watches=[
            Watch(CONFIG_MAPS, label_selector=SOURCE_SELECTOR),
            Watch(CONFIG_MAPS, enqueue_owner(CONFIG_MAPS), label_selector=MIRROR_OF),
        ],
        workers=workers,
    )
