"""A silent watch: the proxy between the controller and the API server keeps every watch connection
open but stops passing anything through (a load balancer that lost its backend). The controller
notices within its watch read timeout, opens new watches, and converges a service created while it
was deaf. The default run uses a 15 s timeout; the long variant the real default (90 s). Prints the
figures (run with -s)."""

from __future__ import annotations

import time
from pathlib import Path

from fault_support import converged, create_services, in_process, isvc, long_or, poll, watches_open
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.faultproxy import FaultProxy


async def test_a_silent_watch_is_noticed_and_reopened(
    fault_cluster: LocalCluster, fault_namespace: str, tmp_path: Path
) -> None:
    admin = fault_cluster.admin()
    ns = fault_namespace
    read_timeout = long_or(15.0, 90.0)
    assert fault_cluster.controller_kubeconfig is not None
    proxy = await FaultProxy.start(fault_cluster.server, fault_cluster.workdir / "pki")
    try:
        kubeconfig = proxy.kubeconfig(fault_cluster.controller_kubeconfig, tmp_path / "via-proxy.kubeconfig")
        async with in_process(kubeconfig, watch_read_timeout=read_timeout) as controller:
            create_services(admin, ns, ["before"])
            await converged(admin, ns, within=120)
            informers = controller.manager.informers
            watches_before = {id(i): i.reflector.stats.watches for i in informers}

            silenced_at = time.monotonic()
            silenced = proxy.silence_watches()
            assert silenced >= len(informers)
            admin.create(isvc("while-deaf"), namespace=ns)
            # The API server sent the new service down the controller's watch, and the proxy held
            # it back: only now does "the controller has not seen it" mean something.
            await poll(
                lambda: any(b'"while-deaf"' in held for held in proxy.withheld()),
                within=30,
                what="the new service's watch event held back by the proxy",
            )
            store = controller.controllers.inference_services.services.store
            assert store.get_object(ns, "while-deaf") is None, "the controller saw it through a silent watch"
            assert admin.get_or_none("apps/v1", "Deployment", "while-deaf", ns) is None

            await poll(
                lambda: (
                    watches_open(controller.manager)
                    and all(i.reflector.stats.watches > watches_before[id(i)] for i in informers)
                ),
                within=read_timeout + 60,
                what="every watch reopened",
            )
            noticed = time.monotonic() - silenced_at
            settled = await converged(admin, ns, within=120)
            assert controller.manager.healthz() == []
    finally:
        await proxy.close()
    print(
        f"\nsilent watch (read timeout {read_timeout:.0f}s): {silenced} streams silenced; every watch "
        f"reopened {noticed:.1f}s later; the service created meanwhile converged {settled:.1f}s after that"
    )
    # The read timeout counts from the last byte a watch received, a little before the silence began;
    # at most one retry backoff after it, every watch is open again.
    assert read_timeout - 1.0 <= noticed <= read_timeout + 35
