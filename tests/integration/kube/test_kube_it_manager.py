"""The Manager running a real controller against a real kube-apiserver: convergence, zero writes
once converged (also after a restart), /metrics, /readyz, leader election between two managers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
from kube_it_gate import WatchGate
from kube_it_helpers import eventually
from kube_it_mirror import CONTROLLER, MIRROR_OF, desired_mirror, mirror_name, setup_mirror
from llmkube_testing.controller_harness import idle
from llmkube_testing.request_info import ApiRequest
from llmkube_testing.request_log import RequestLog
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from llmkube.kube.clock import format_micro_time
from llmkube.kube.control import Watch
from llmkube.kube.errors import Conflict, NotFound
from llmkube.kube.leader import LeaderElectionTiming, LeadershipLost, NotLeader
from llmkube.kube.resource import CONFIG_MAPS, EVENTS, LEASES
from llmkube.kube.rest import ApiClient, load_client_config
from llmkube.kube.rest.transport import AiohttpTransport, TransportError
from llmkube.kube.types import ObjectKey
from llmkube.manager import Manager, ManagerConfig

pytestmark = pytest.mark.integration

FAST_LEASE = LeaderElectionTiming(lease_duration=3, renew_deadline=2, retry_period=1)


def reconciles(result: str = "success") -> float:
    return (
        REGISTRY.get_sample_value(
            "controller_runtime_reconcile_total", {"controller": CONTROLLER, "result": result}
        )
        or 0.0
    )


def config(api_cluster: Any, namespace: str, **overrides: Any) -> ManagerConfig:
    values: dict[str, Any] = {
        "kubeconfig": api_cluster.kubeconfig,
        "namespace": namespace,
        "metrics_bind_address": "127.0.0.1:0",
        "health_bind_address": "127.0.0.1:0",
        "configure_logging": False,
        "handle_signals": False,
        "lease_namespace": namespace,
        "leader_timing": FAST_LEASE,
        "graceful_shutdown_timeout": 10,
    }
    return ManagerConfig(**{**values, **overrides})


@asynccontextmanager
async def running(manager: Manager) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(manager.run(setup_mirror))
    try:
        yield task
    finally:
        manager.request_shutdown()
        with contextlib.suppress(LeadershipLost):
            await asyncio.wait_for(task, 20)


def source(namespace: str, name: str, data: dict[str, str], **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": {"mirror": "yes", **labels}},
        "data": data,
    }


async def mirror_data(client: ApiClient, namespace: str, name: str) -> dict[str, str] | None:
    try:
        return (await client.get(CONFIG_MAPS, mirror_name(name), namespace)).get("data") or {}
    except NotFound:
        return None


async def wait_mirrored(
    client: ApiClient, namespace: str, expected: dict[str, dict[str, str] | None]
) -> None:
    async with asyncio.timeout(30):
        while True:
            seen = {name: await mirror_data(client, namespace, name) for name in expected}
            if seen == expected:
                return
            await asyncio.sleep(0.1)


async def test_mirror_converges_and_then_makes_no_writes(
    client: ApiClient, api_cluster: Any, namespace: str
) -> None:
    for index in range(3):
        await client.create(CONFIG_MAPS, source(namespace, f"src-{index}", {"i": str(index)}))
    await client.create(
        CONFIG_MAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain", "namespace": namespace}},
    )
    requests = RequestLog()
    manager = Manager(config(api_cluster, namespace), request_observer=requests)
    async with running(manager):
        await asyncio.wait_for(manager.controllers_started.wait(), 20)
        await wait_mirrored(
            client, namespace, {f"src-{i}": {"i": str(i)} for i in range(3)} | {"plain": None}
        )
        mirrors = manager.informer(CONFIG_MAPS, label_selector=MIRROR_OF)
        await eventually(lambda: len(mirrors.store) == 3)
        await idle([manager.controller(CONTROLLER)])
        await manager.recorder.drain()

        # Converged.  Wake the controller without changing anything it owns.
        writes = requests.mutating_requests()
        done_before = reconciles()
        await client.patch(CONFIG_MAPS, "src-0", {"metadata": {"annotations": {"note": "hello"}}}, namespace)
        await client.patch(
            CONFIG_MAPS, mirror_name("src-1"), {"metadata": {"annotations": {"seen-by": "me"}}}, namespace
        )
        await client.patch(
            CONFIG_MAPS,
            mirror_name("src-2"),
            {"data": {"extra": "theirs"}},
            namespace,
            field_manager="someone",
        )
        await eventually(lambda: reconciles() >= done_before + 3)
        # Those reconciles are over and every Event they recorded is written: none was a write.
        await idle([manager.controller(CONTROLLER)])
        await manager.recorder.drain()
        assert requests.mutating_requests() == writes  # three reconciles, zero writes

        # Real changes are applied.
        await client.patch(CONFIG_MAPS, "src-0", {"data": {"i": "changed"}}, namespace)
        await wait_mirrored(client, namespace, {"src-0": {"i": "changed"}})
        await client.patch(
            CONFIG_MAPS, mirror_name("src-1"), {"data": {"i": "tampered"}}, namespace, field_manager="someone"
        )
        await wait_mirrored(client, namespace, {"src-1": {"i": "1"}})
        assert (await mirror_data(client, namespace, "src-2")) == {
            "i": "2",
            "extra": "theirs",
        }  # not ours: kept
        await client.delete(CONFIG_MAPS, "src-2", namespace)
        await wait_mirrored(client, namespace, {"src-2": None})
        events = await client.list_page(EVENTS, namespace)
        reasons = {(e["reason"], e["regarding"]["name"]) for e in events["items"]}
        assert ("Mirrored", "src-0") in reasons

    # A restart against the converged cluster writes nothing at all.
    restarted_requests = RequestLog()
    restarted = Manager(config(api_cluster, namespace), request_observer=restarted_requests)
    before = reconciles()
    async with running(restarted):
        await asyncio.wait_for(restarted.controllers_started.wait(), 20)
        await eventually(lambda: reconciles() >= before + 2)  # src-0 and src-1 (initial list, low priority)
        await idle([restarted.controller(CONTROLLER)])
        await restarted.recorder.drain()
        assert restarted_requests.mutating_requests() == 0
        assert restarted_requests.request_counts  # it did read: LIST + WATCH


async def test_metrics_and_probes_are_served(client: ApiClient, api_cluster: Any, namespace: str) -> None:
    await client.create(CONFIG_MAPS, source(namespace, "m", {"k": "v"}))
    manager = Manager(config(api_cluster, namespace, leader_election=True))
    async with running(manager):
        await asyncio.wait_for(manager.controllers_started.wait(), 20)
        await wait_mirrored(client, namespace, {"m": {"k": "v"}})
        async with aiohttp.ClientSession() as http:
            async with http.get(manager.http.url("health") + "/readyz") as response:
                assert (response.status, await response.text()) == (200, "ok\n")
            async with http.get(manager.http.url("health") + "/healthz") as response:
                assert response.status == 200
            async with http.get(manager.http.url("metrics") + "/metrics") as response:
                assert response.status == 200
                text = await response.text()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    reconcile_total = families["controller_runtime_reconcile"]
    assert reconcile_total.type == "counter"
    results = {s.labels["result"] for s in reconcile_total.samples if s.labels["controller"] == CONTROLLER}
    assert results == {"success", "error", "requeue", "requeue_after"}
    buckets = [
        s.labels["le"]
        for s in families["controller_runtime_reconcile_time_seconds"].samples
        if s.name.endswith("_bucket") and s.labels["controller"] == CONTROLLER
    ]
    assert buckets[:4] == ["0.005", "0.01", "0.025", "0.05"] and buckets[-2:] == ["60.0", "+Inf"]
    depth = [s for s in families["workqueue_depth"].samples if s.labels["name"] == CONTROLLER]
    assert depth and all(set(s.labels) == {"name", "controller", "priority"} for s in depth)
    expected_families = (
        "workqueue_adds",
        "workqueue_retries",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "controller_runtime_active_workers",
        "controller_runtime_max_concurrent_reconciles",
        "process_resident_memory_bytes",
    )
    for family in expected_families:
        assert family in families, family
    requests = families["rest_client_requests"]
    host = api_cluster.server.removeprefix("https://")
    assert any(s.labels == {"code": "200", "method": "GET", "host": host} for s in requests.samples)
    status = [
        s.value
        for s in families["leader_election_master_status"].samples
        if s.labels["name"] == manager.config.lease_name
    ]
    assert status == [1.0]
    assert not [s.name for f in families.values() for s in f.samples if s.name.endswith("_created")]


async def test_one_leader_runs_the_controllers_and_hands_over_on_shutdown(
    client: ApiClient, api_cluster: Any, namespace: str
) -> None:
    first = Manager(config(api_cluster, namespace, leader_election=True))
    second_requests = RequestLog()
    second = Manager(config(api_cluster, namespace, leader_election=True), request_observer=second_requests)
    lease_reads = ApiRequest("get", "coordination.k8s.io", "leases", "")
    async with running(first) as first_task:
        await asyncio.wait_for(first.controllers_started.wait(), 20)
        async with running(second):
            await eventually(lambda: all(informer.has_synced() for informer in second.informers))
            # The first renews the lease twice (by then an unrenewed lease would have run out), and
            # the second reads it again after that: it saw a held lease, and stays a standby.
            renewals: set[str] = set()
            async with asyncio.timeout(30):
                while len(renewals) < 3:
                    lease = await client.get(LEASES, first.config.lease_name, namespace)
                    renewals.add(lease["spec"]["renewTime"])
                    await asyncio.sleep(0.1)
            reads = second_requests.api_requests[lease_reads]
            await eventually(lambda: second_requests.api_requests[lease_reads] > reads)
            assert not second.controllers_started.is_set()  # warm caches, no workers: not the leader
            lease = await client.get(LEASES, first.config.lease_name, namespace)
            assert lease["spec"]["holderIdentity"] == first.elector.identity  # type: ignore[union-attr]
            await client.create(CONFIG_MAPS, source(namespace, "a", {"v": "1"}))
            await wait_mirrored(client, namespace, {"a": {"v": "1"}})
            assert second_requests.mutating_requests() == 0

            first.request_shutdown()
            await asyncio.wait_for(first_task, 20)
            released = await client.get(LEASES, first.config.lease_name, namespace)
            assert released["spec"]["holderIdentity"] == ""  # released, not left to expire
            # The standby takes over at its next retry (retry period 1 s, jitter up to 2.2 s).
            await asyncio.wait_for(second.controllers_started.wait(), 5)
            await client.create(CONFIG_MAPS, source(namespace, "b", {"v": "2"}))
            await wait_mirrored(client, namespace, {"b": {"v": "2"}})
            lease = await client.get(LEASES, first.config.lease_name, namespace)
            assert lease["spec"]["holderIdentity"] == second.elector.identity  # type: ignore[union-attr]
            assert lease["spec"]["leaseTransitions"] == 1


class Partitionable(WatchGate):
    """Fails every request (not only watches) while ``cut_off`` is set."""

    cut_off = False

    def send(self, method: str, url: str, **kwargs: Any) -> Any:
        if self.cut_off:
            raise TransportError("partitioned from the API server")
        return super().send(method, url, **kwargs)


async def test_a_leader_that_cannot_renew_stops_its_workers(api_cluster: Any, namespace: str) -> None:
    settings = await load_client_config(api_cluster.kubeconfig)
    transport = Partitionable(AiohttpTransport(settings.ssl_context))
    leader_client = ApiClient(settings.host, transport=transport, auth=settings.auth)
    manager = Manager(config(api_cluster, namespace, leader_election=True), client=leader_client)
    task = asyncio.create_task(manager.run(setup_mirror))
    try:
        await asyncio.wait_for(manager.controllers_started.wait(), 20)
        assert manager.controller(CONTROLLER).running
        transport.cut_off = True
        with pytest.raises(LeadershipLost):
            await asyncio.wait_for(task, 15)
        assert not manager.controller(CONTROLLER).running
    finally:
        await leader_client.close()


def test_desired_mirror_shape() -> None:
    src = source("ns", "x", {"a": "1"})
    src["metadata"]["uid"] = "u"
    mirror = desired_mirror(src)
    assert mirror["metadata"]["name"] == "x-mirror"
    assert mirror["metadata"]["labels"] == {MIRROR_OF: "x"}
    assert mirror["metadata"]["ownerReferences"][0]["uid"] == "u"


class HoldLists(WatchGate):
    """Holds every LIST until :meth:`release_lists` (caches that take their time to sync)."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.lists_open = asyncio.Event()
        self.lists_held = 0

    def release_lists(self) -> None:
        self.lists_open.set()

    @asynccontextmanager
    async def _send(self, method: str, url: str, headers: Any, body: Any, request_timeout: Any) -> Any:
        if method == "GET" and "watch=true" not in url and "/leases" not in url:
            self.lists_held += 1
            await self.lists_open.wait()
        async with super()._send(method, url, headers, body, request_timeout) as response:
            yield response


async def steal_lease(client: ApiClient, namespace: str, name: str, thief: str = "thief") -> None:
    """Another holder written into the Lease (an operator's edit, a candidate with a skewed view);
    retried, as the leader renews it every second."""
    while True:
        lease = await client.get(LEASES, name, namespace)
        lease["spec"].update(
            holderIdentity=thief,
            renewTime=format_micro_time(datetime.now(UTC)),
            leaseDurationSeconds=60,
        )
        with contextlib.suppress(Conflict):
            await client.replace(LEASES, lease)
            return


async def lease_holder(client: ApiClient, namespace: str, name: str) -> str | None:
    try:
        return str((await client.get(LEASES, name, namespace))["spec"].get("holderIdentity") or "")
    except NotFound:
        return None


async def test_a_lease_lost_while_the_caches_sync_never_starts_the_workers(
    client: ApiClient, api_cluster: Any, namespace: str
) -> None:
    await client.create(CONFIG_MAPS, source(namespace, "s", {"k": "v"}))
    settings = await load_client_config(api_cluster.kubeconfig)
    gate = HoldLists(AiohttpTransport(settings.ssl_context))
    manager_client = ApiClient(settings.host, transport=gate, auth=settings.auth)
    manager = Manager(config(api_cluster, namespace, leader_election=True), client=manager_client)
    started_reconciles = reconciles() + reconciles("error")
    task = asyncio.create_task(manager.run(setup_mirror))
    try:
        await eventually(lambda: manager.elector is not None and manager.elector.is_leader)
        assert gate.lists_held >= 1  # leader, caches still syncing
        await steal_lease(client, namespace, manager.config.lease_name)
        await eventually(lambda: not manager.is_leader, within=2 * FAST_LEASE.retry_period + 1)
        gate.release_lists()  # now the caches sync
        with pytest.raises(LeadershipLost):
            await asyncio.wait_for(task, 15)
        assert not manager.controllers_started.is_set()
        assert reconciles() + reconciles("error") == started_reconciles  # not one reconcile ran
        assert await mirror_data(client, namespace, "s") is None  # and nothing was written
        assert await lease_holder(client, namespace, manager.config.lease_name) == "thief"
    finally:
        if not task.done():
            task.cancel()
        await manager_client.close()


async def test_a_lost_lease_stops_in_flight_reconciles_at_once_and_refuses_their_writes(
    client: ApiClient, api_cluster: Any, namespace: str
) -> None:
    entered, proceed = asyncio.Event(), asyncio.Event()

    def setup(manager: Manager) -> None:
        sources = manager.informer(CONFIG_MAPS, label_selector="mirror=yes")

        async def slow_reconcile(key: ObjectKey) -> None:
            entered.set()
            await proceed.wait()  # a long reconcile: a copy, a slow API server
            source_object = sources.store.get_object(key.namespace, key.name)
            assert source_object is not None
            await manager.applier.apply(CONFIG_MAPS, desired_mirror(source_object), None)

        manager.add_controller(
            "slow-mirror", slow_reconcile, watches=[Watch(CONFIG_MAPS, label_selector="mirror=yes")]
        )

    await client.create(CONFIG_MAPS, source(namespace, "s", {"k": "v"}))
    manager = Manager(config(api_cluster, namespace, leader_election=True, graceful_shutdown_timeout=30))
    task = asyncio.create_task(manager.run(setup))
    try:
        await asyncio.wait_for(entered.wait(), 20)
        stolen_at = asyncio.get_running_loop().time()
        await steal_lease(client, namespace, manager.config.lease_name)
        await eventually(lambda: not manager.is_leader, within=2 * FAST_LEASE.retry_period + 1)
        proceed.set()  # a reconcile still running now would write
        with pytest.raises(LeadershipLost):
            await asyncio.wait_for(task, 40)
        stopped_after = asyncio.get_running_loop().time() - stolen_at
        assert stopped_after < 5  # not the 30 s grace period: the reconcile was cancelled
        assert await mirror_data(client, namespace, "s") is None
        with pytest.raises(NotLeader):  # and whatever else still holds the client cannot write
            await manager.client.create(CONFIG_MAPS, source(namespace, "late", {}))
        assert await lease_holder(client, namespace, manager.config.lease_name) == "thief"
    finally:
        proceed.set()
        if not task.done():
            task.cancel()
