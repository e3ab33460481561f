"""A compact informer cache (JSON bytes, parsed on read) serves the same objects and hands the same
changes to its handlers as a plain one, on a real kube-apiserver, through the trimming transform
the controller uses for the kinds it owns."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kube_it_helpers import eventually

from llmkube.kube.cache import Change, Informer, by_label, keep_owned
from llmkube.kube.resource import DEPLOYMENTS
from llmkube.kube.rest import ApiClient

pytestmark = pytest.mark.integration

OURS = "llmkube-compact-test"


def deployment(namespace: str, name: str, *, image: str = "llama:1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": name, "tier": "serving"}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "server", "image": image, "args": ["--port", "8080"]}]},
            },
        },
    }


def described(change: Change) -> tuple[str, Any, Any]:
    return change.type, change.old_obj, change.new


async def test_a_compact_cache_serves_what_a_plain_cache_serves(client: ApiClient, namespace: str) -> None:
    # Present before the informers start (the initial list) ...
    for name in ("first", "second", "third"):
        await client.apply(DEPLOYMENTS, deployment(namespace, name), field_manager=OURS)
    caches: dict[bool, Informer] = {}
    changes: dict[bool, list[Change]] = {False: [], True: []}
    for compact in (False, True):
        caches[compact] = Informer(
            client,
            DEPLOYMENTS,
            namespace=namespace,
            transform=keep_owned(OURS, ("spec", "replicas"), ("status", "replicas")),
            indexers={"tier": by_label("tier")},
            compact=compact,
        )
        caches[compact].add_handler(changes[compact].append)
        caches[compact].start()
    try:
        for informer in caches.values():
            await asyncio.wait_for(informer.wait_for_sync(), 20)
        # ... then changed while watched: ours, someone else's scale, a new object, a delete.
        await client.apply(DEPLOYMENTS, deployment(namespace, "first", image="llama:2"), field_manager=OURS)
        await client.patch(DEPLOYMENTS, "second", {"spec": {"replicas": 3}}, namespace)
        labelled = {"metadata": {"labels": {"added": "by-someone"}}}
        await client.patch(DEPLOYMENTS, "second", labelled, namespace)
        await client.apply(DEPLOYMENTS, deployment(namespace, "fourth"), field_manager=OURS)
        await client.delete(DEPLOYMENTS, "third", namespace)
        latest = {
            item["metadata"]["name"]: item["metadata"]["resourceVersion"]
            for item in await client.list_all(DEPLOYMENTS, namespace=namespace)
        }
        assert sorted(latest) == ["first", "fourth", "second"]

        def caught_up(informer: Informer) -> bool:
            cached = {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in informer.store}
            return cached == latest

        # The deployment controller keeps writing status: compare once both caches hold one list.
        await eventually(lambda: all(caught_up(informer) for informer in caches.values()), within=30)
        plain, compact = caches[False].store, caches[True].store
        assert compact.compact and not plain.compact
        keys = sorted(plain.keys())  # (iterating a store yields its objects)
        assert sorted(compact.keys()) == keys
        for key in keys:
            assert compact.get(key) == plain.get(key), key
        serving = f"{namespace}/serving"
        assert compact.by_index("tier", serving) == plain.by_index("tier", serving)
        scaled = compact.get(f"{namespace}/second")
        assert scaled is not None and scaled["spec"]["replicas"] == 3, "a field read although others own it"
        assert scaled["metadata"]["labels"]["added"] == "by-someone"
        assert "restartPolicy" not in scaled["spec"]["template"]["spec"], "server defaults are trimmed"
        await eventually(lambda: len(changes[True]) == len(changes[False]), within=10)
        assert [described(change) for change in changes[True]] == [
            described(change) for change in changes[False]
        ]
        assert {change.type for change in changes[True]} >= {"ADDED", "MODIFIED", "DELETED"}
    finally:
        for informer in caches.values():
            await informer.stop()
