"""Informers against a real kube-apiserver: list+watch, bookmarks, deletes while disconnected, a
real 410 after etcd compaction (Events have no watch cache, so their watches read etcd), and a real
"too large resource version"."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from kube_it_gate import WatchGate
from kube_it_helpers import eventually
from llmkube_testing.etcd import compact

from llmkube.kube.cache import Informer
from llmkube.kube.cache.reflector import Reflector
from llmkube.kube.cache.store import Change, Listed, Store, Tombstone
from llmkube.kube.errors import ServerTimeout, is_resource_version_too_large
from llmkube.kube.resource import CONFIG_MAPS, EVENTS
from llmkube.kube.rest import ApiClient, load_client_config
from llmkube.kube.rest.transport import AiohttpTransport

pytestmark = pytest.mark.integration


@pytest.fixture
async def gated(api_cluster: Any) -> AsyncIterator[tuple[ApiClient, WatchGate]]:
    config = await load_client_config(api_cluster.kubeconfig)
    gate = WatchGate(AiohttpTransport(config.ssl_context))
    async with ApiClient(config.host, transport=gate, auth=config.auth) as client:
        yield client, gate


def config_map(namespace: str, name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
    }


def event(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "eventTime": "2030-01-01T00:00:00.000000Z",
        "reportingController": "llmkube-test",
        "reportingInstance": "pytest",
        "action": "Test",
        "reason": "Testing",
        "note": name,
        "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": "anything", "namespace": namespace},
    }


async def test_list_then_watch_with_selector_and_paging(client: ApiClient, namespace: str) -> None:
    for index in range(5):
        await client.create(CONFIG_MAPS, config_map(namespace, f"in-{index}", app="yes"))
    await client.create(CONFIG_MAPS, config_map(namespace, "out", app="no"))
    informer = Informer(client, CONFIG_MAPS, namespace=namespace, label_selector="app=yes", page_size=2)
    changes: list[Change] = []
    informer.add_handler(changes.append)
    informer.start()
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 10)
        assert sorted(informer.store.keys()) == [f"{namespace}/in-{index}" for index in range(5)]
        assert all(change.initial for change in changes)
        cached = informer.store.get(f"{namespace}/in-0")
        assert cached is not None and cached["kind"] == "ConfigMap"
        # Created by another manager: the cache keeps who wrote it, never that manager's field set.
        assert [sorted(entry) for entry in cached["metadata"]["managedFields"]] == [
            ["apiVersion", "manager", "operation"]
        ]
        changes.clear()
        await client.create(CONFIG_MAPS, config_map(namespace, "in-5", app="yes"))
        await client.patch(CONFIG_MAPS, "in-0", {"data": {"k": "v"}}, namespace)
        await client.delete(CONFIG_MAPS, "in-1", namespace)
        await client.patch(CONFIG_MAPS, "out", {"data": {"k": "v"}}, namespace)  # not selected
        await eventually(lambda: len(changes) >= 3)
        assert [(c.type, c.obj["metadata"]["name"], c.initial) for c in changes] == [
            ("ADDED", "in-5", False),
            ("MODIFIED", "in-0", False),
            ("DELETED", "in-1", False),
        ]
        assert informer.reflector.stats.lists == 1
    finally:
        await informer.stop()


async def test_bookmarks_and_server_side_watch_timeouts(client: ApiClient, namespace: str) -> None:
    # A 3..6 s server timeout: the apiserver sends a bookmark ~2 s before it closes the watch.
    informer = Informer(client, CONFIG_MAPS, namespace=namespace, min_watch_timeout=3)
    informer.start()
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 10)
        start_rv = int(informer.reflector.last_sync_rv or 0)
        other = await client.create(CONFIG_MAPS, config_map("default", f"elsewhere-{namespace}"[:60]))
        await eventually(
            lambda: informer.reflector.stats.bookmarks >= 1 and informer.reflector.stats.watches >= 2
        )
        # The bookmark moved our RV past a change we never saw (it was in another namespace).
        assert (
            int(informer.reflector.last_sync_rv or 0) >= int(other["metadata"]["resourceVersion"]) > start_rv
        )
        assert informer.reflector.stats.lists == 1  # watch timeouts re-watch, they never relist
        assert informer.reflector.stats.failures == 0
        await client.delete(CONFIG_MAPS, other["metadata"]["name"], "default")
    finally:
        await informer.stop()


async def test_deletes_while_disconnected_arrive_on_reconnect(
    gated: tuple[ApiClient, WatchGate], namespace: str
) -> None:
    client, gate = gated
    for name in ("keep", "gone"):
        await client.create(CONFIG_MAPS, config_map(namespace, name))
    informer = Informer(client, CONFIG_MAPS, namespace=namespace)
    changes: list[Change] = []
    informer.add_handler(changes.append)
    informer.start()
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 10)
        await asyncio.sleep(1.2)  # let the watch live past the "very short watch" second
        gate.partition()
        await eventually(lambda: gate.held >= 1)
        await client.delete(CONFIG_MAPS, "gone", namespace)
        await client.create(CONFIG_MAPS, config_map(namespace, "new"))
        changes.clear()
        gate.heal()
        await eventually(lambda: sorted(informer.store.keys()) == [f"{namespace}/keep", f"{namespace}/new"])
        assert [(c.type, c.obj["metadata"]["name"]) for c in changes] == [
            ("DELETED", "gone"),
            ("ADDED", "new"),
        ]
        assert informer.reflector.stats.lists == 1  # resumed from the watch cache: no relist needed
    finally:
        await informer.stop()


async def test_expired_watch_relists_and_synthesises_deletes(
    gated: tuple[ApiClient, WatchGate], namespace: str, api_cluster: Any
) -> None:
    client, gate = gated
    for name in ("e-keep", "e-gone"):
        await client.create(EVENTS, event(namespace, name))
    informer = Informer(client, EVENTS, namespace=namespace)
    changes: list[Change] = []
    informer.add_handler(changes.append)
    informer.start()
    try:
        await asyncio.wait_for(informer.wait_for_sync(), 10)
        await asyncio.sleep(1.2)
        gate.partition()
        await eventually(lambda: gate.held >= 1)
        old_rv = informer.reflector.last_sync_rv
        await client.delete(EVENTS, "e-gone", namespace)
        await client.create(EVENTS, event(namespace, "e-new"))
        await compact(api_cluster.etcd_endpoint)  # the RV we would resume from is gone for good
        changes.clear()
        gate.heal()
        await eventually(
            lambda: sorted(informer.store.keys()) == [f"{namespace}/e-keep", f"{namespace}/e-new"]
        )
        stats = informer.reflector.stats
        assert stats.relists_after_expired == 1 and stats.lists == 2
        assert informer.reflector.last_sync_rv != old_rv
        deleted = [change for change in changes if change.type == "DELETED"]
        assert len(deleted) == 1 and isinstance(deleted[0].old, Tombstone)
        assert deleted[0].obj["metadata"]["name"] == "e-gone"
        assert [(c.type, c.obj["metadata"]["name"]) for c in changes if c.type != "DELETED"] == [
            ("ADDED", "e-new")
        ]
        # And the informer keeps working after the relist.
        await client.create(EVENTS, event(namespace, "e-after"))
        await eventually(lambda: f"{namespace}/e-after" in informer.store)
    finally:
        await informer.stop()


class ListSink:
    def __init__(self) -> None:
        self.names: list[str] = []
        self.store = Store()

    def listed(self, obj: dict[str, Any]) -> Listed:
        return self.store.listed(obj)

    def replace_listed(self, listed: list[Listed], resource_version: str) -> None:
        self.names = sorted(item.key.partition("/")[2] for item in listed)

    def watch_event(self, event_type: str, obj: dict[str, Any]) -> None:
        return None


async def test_a_resource_version_the_server_has_not_reached_is_relisted_from_etcd(
    api_cluster: Any, namespace: str
) -> None:
    """After an etcd restore (or from a lagging API server) our last RV is newer than anything the
    server has: it answers 504 Timeout with the ResourceVersionTooLarge cause, after waiting 3 s
    for its cache to catch up. Asking again for that RV would wait for ever; a quorum read works."""
    config = await load_client_config(api_cluster.kubeconfig)
    # max_retries=0: the server says Retry-After: 1, and ten polite retries take 40 s.
    async with ApiClient.from_config(config, max_retries=0) as client:
        await client.create(CONFIG_MAPS, config_map(namespace, "a"))
        sink = ListSink()
        reflector = Reflector(client, CONFIG_MAPS, sink, namespace=namespace)
        await reflector.relist()
        synced = reflector.last_sync_rv
        assert synced is not None
        future = str(int(synced) + 1_000_000)

        # The shape we decide on: the cause, not the message.
        with pytest.raises(ServerTimeout) as refused:
            await client.list_page(CONFIG_MAPS, namespace, resource_version=future)
        assert (refused.value.status, refused.value.reason) == (504, "Timeout")
        assert [cause.reason for cause in refused.value.causes] == ["ResourceVersionTooLarge"]
        assert is_resource_version_too_large(refused.value)

        await client.create(CONFIG_MAPS, config_map(namespace, "b"))
        reflector.last_sync_rv = future  # as if etcd had been restored from an older backup
        await reflector.relist()
        assert sink.names == ["a", "b"]
        assert reflector.last_sync_rv is not None and int(reflector.last_sync_rv) < int(future)
        assert reflector.stats.quorum_relists == 1


async def test_the_first_list_arrives_in_pages_on_a_real_server(client: ApiClient, namespace: str) -> None:
    # A LIST from resourceVersion "0" would be served whole from the watch cache (limit ignored):
    # at 10,000 objects one document of them all, parsed at once.
    for index in range(7):
        await client.create(
            CONFIG_MAPS,
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"page-{index}"}},
            namespace=namespace,
        )
    sink = ListSink()
    reflector = Reflector(client, CONFIG_MAPS, sink, namespace=namespace, page_size=3)
    await reflector.relist()
    assert sink.names == [f"page-{index}" for index in range(7)]
    assert reflector.stats.list_pages == 3
