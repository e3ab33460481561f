"""etcd compacted while the controller is cut off: when it comes back, every watch resumes from a
resourceVersion that no longer exists (410 Expired) and the reflectors relist (a "not older than"
list, which the API server serves from etcd's present). Nothing that changed meanwhile is lost: new
services get their Deployment, a changed one its new replica count, a deleted one leaves the cache.

A control plane of its own, with the API server's watch cache off: with it on, watches are served
from the cache's own window and compaction alone does not expire them. Prints the figures."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from fault_support import (
    create_services,
    eventually,
    in_process,
    installed_cluster,
    long_or,
    merge_patch,
    poll,
)
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.etcd import compact
from llmkube_testing.rest import KubeRest
from llmkube_testing.tcpproxy import TcpProxy, kubeconfig_through

from llmkube.controllers.resources import INFERENCE_SERVICES


@pytest.fixture(scope="module")
def uncached_cluster() -> Iterator[LocalCluster]:
    yield from installed_cluster("api", apiserver_args=("--watch-cache=false",))


def deployment_replicas(admin: KubeRest, namespace: str) -> dict[str, int]:
    return {
        d["metadata"]["name"]: d["spec"]["replicas"] for d in admin.list("apps/v1", "Deployment", namespace)
    }


async def test_a_compaction_while_cut_off_expires_every_resource_version_and_loses_nothing(
    uncached_cluster: LocalCluster, tmp_path: Path
) -> None:
    cluster = uncached_cluster
    admin = cluster.admin()
    ns = "compaction"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    before = [f"before-{i}" for i in range(long_or(5, 20))]
    during = [f"during-{i}" for i in range(long_or(5, 20))]
    server = urlsplit(cluster.server)
    relay = await TcpProxy.start(server.hostname or "127.0.0.1", server.port or 443)
    assert cluster.controller_kubeconfig is not None
    kubeconfig = kubeconfig_through(relay, cluster.controller_kubeconfig, tmp_path / "via-relay.kubeconfig")
    try:
        async with in_process(kubeconfig) as controller:
            create_services(admin, ns, before)
            await eventually(lambda: len(deployment_replicas(admin, ns)) == len(before), within=60)
            services = next(i for i in controller.manager.informers if i.resource == INFERENCE_SERVICES)
            expired_before = services.reflector.stats.relists_after_expired

            await relay.refuse()  # cut off: connections reset, new ones refused
            create_services(admin, ns, during)
            merge_patch(admin, "InferenceService", before[0], ns, {"spec": {"replicas": 3}})
            admin.delete("inference.llmkube.dev/v1alpha1", "InferenceService", before[1], ns)
            assert cluster.etcd_endpoint is not None
            revision = await compact(cluster.etcd_endpoint)
            await relay.accept()
            back = time.monotonic()

            # (without a garbage collector the deleted service's Deployment stays: not compared)
            expected = {name: 1 for name in before[2:] + during} | {before[0]: 3}

            def caught_up() -> bool:
                found = deployment_replicas(admin, ns)
                return all(found.get(name) == replicas for name, replicas in expected.items())

            await eventually(caught_up, within=120, what="the Deployments caught up")
            converged = time.monotonic() - back
            await poll(
                lambda: services.store.get_object(ns, before[1]) is None,
                within=30,
                what="the deleted service gone",
            )
            stats = services.reflector.stats
            assert stats.relists_after_expired > expired_before, stats  # the watch got 410
            assert controller.manager.healthz() == []
            expired_everywhere = sum(
                i.reflector.stats.relists_after_expired for i in controller.manager.informers
            )
            informers = len(controller.manager.informers)
    finally:
        await relay.close()
    print(
        f"\netcd compacted to revision {revision} while the controller was cut off: 410 on re-watch "
        f"({expired_everywhere} relists after Expired across {informers} informers); "
        f"{len(during)} new services, 1 change and 1 delete caught up "
        f"{converged:.1f}s after it was back"
    )
