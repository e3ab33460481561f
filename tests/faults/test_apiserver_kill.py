"""kube-apiserver killed with SIGKILL and started again (same etcd, same port) while the controller
converges new services next to converged ones. The controller never crashes, its watches come
back, the new services converge, the relist after the restart writes nothing for the services that
had converged (counted by the API server's audit log), and a change made afterwards is applied.
The long variant kills it a second time once everything converged: not one write. Prints the
figures (run with -s)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import UTC, datetime

from fault_support import (
    LONG,
    converged,
    create_services,
    eventually,
    in_process,
    long_or,
    merge_patch,
    poll,
    quiesced,
    watches_open,
    writes_in,
)
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.controller_harness import ControllerHarness, reconcile_log

from llmkube.kube.types import ObjectKey

#: client-go's reflector backoff: 0.8 s doubling to a 30 s cap, jittered up to twice that
LONGEST_RETRY = 60.0


async def kill_and_restart(
    cluster: LocalCluster, controller: ControllerHarness, down_for: float
) -> tuple[float, float]:
    """SIGKILL the API server, leave it down `down_for` seconds once every watch of the controller
    has failed on it, start it again; returns (seconds to be ready, seconds from ready until every
    watch of the controller is open again)."""
    informers = controller.manager.informers
    failures = {id(i): i.reflector.stats.failures for i in informers}
    cluster.kill_apiserver()
    # The controller felt the outage (every reflector failed against it) before it counts as ridden out.
    await poll(
        lambda: all(i.reflector.stats.failures > failures[id(i)] for i in informers),
        within=LONGEST_RETRY + 30,
        what="every watch of the controller failed on the dead API server",
    )
    await asyncio.sleep(down_for)  # the outage itself: every request and watch fails meanwhile
    restarting = time.monotonic()
    cluster.restart_apiserver(wait=False)  # from this thread: see restart_apiserver
    await eventually(cluster.apiserver_ready, within=90, what="the API server ready again")
    ready = time.monotonic() - restarting
    assert controller.manager.healthz() == [], "the controller broke while the API server was down"
    watching = await poll(
        lambda: watches_open(controller.manager), within=LONGEST_RETRY + 30, what="every watch open again"
    )
    return ready, watching


async def reconciled_again(controller: ControllerHarness, namespace: str, names: list[str]) -> None:
    """Each named service is reconciled once more (enqueued now, after the restart), and the
    controller is idle with every Event written: whatever the resumed watches or a relist delivered
    has been handled too, so "nothing written for them" means a reconcile after the restart found
    nothing to do, however slowly the machine ran."""
    services = controller.controllers.inference_services.controller
    log = reconcile_log(services)
    keys = [ObjectKey(namespace, name) for name in names]
    before = {key: log(key) for key in keys}
    for key in keys:
        services.enqueue(key)
    await poll(
        lambda: all(log(key) > count for key, count in before.items()),
        within=60,
        what="every converged service reconciled after the restart",
    )
    await controller.idle()


async def test_an_apiserver_kill_9_is_ridden_out(fault_cluster: LocalCluster, fault_namespace: str) -> None:
    admin = fault_cluster.admin()
    ns = fault_namespace
    first = [f"before-{i}" for i in range(long_or(5, 20))]
    during = [f"during-{i}" for i in range(long_or(5, 20))]
    down = long_or(3.0, 10.0)
    assert fault_cluster.controller_kubeconfig is not None and fault_cluster.audit_log is not None
    async with in_process(fault_cluster.controller_kubeconfig) as controller:
        create_services(admin, ns, first)
        await converged(admin, ns, within=120)
        await quiesced(controller.requests)
        since = datetime.now(UTC)

        # More services, and the API server dies while the controller works on them.
        create_services(admin, ns, during)
        await asyncio.sleep(0.5)  # somewhere in the middle of that work
        ready, watching = await kill_and_restart(fault_cluster, controller, down)
        settled = await converged(admin, ns, within=180)
        await quiesced(controller.requests)
        await reconciled_again(controller, ns, first)
        writes = writes_in(fault_cluster, ns, since)
        untouched = [entry for entry in writes if entry.name.startswith("before-")]
        assert untouched == [], "services that had converged were written again after the restart"
        figures = [
            f"down {down:.0f}s, ready again in {ready:.1f}s, every watch of the controller open again "
            f"{watching:.1f}s later, {len(during)} new services converged {watching + settled:.1f}s after "
            f"the API server was ready ({len(writes)} writes for them in all, "
            f"failed: {dict(Counter(e.code for e in writes if e.code >= 400))}), "
            f"0 writes for the {len(first)} converged ones"
        ]

        if LONG:  # killed again once everything converged: the relist finds nothing to do
            writes_before = controller.mutating_requests()
            ready_2, watching_2 = await kill_and_restart(fault_cluster, controller, down)
            await reconciled_again(controller, ns, first + during)
            assert controller.mutating_requests() == writes_before, "the relist after a restart wrote"
            figures.append(
                f"again when converged: ready in {ready_2:.1f}s, watching {watching_2:.1f}s later, 0 writes"
            )

        # A change after the restart reaches the Deployment.
        merge_patch(admin, "InferenceService", first[0], ns, {"spec": {"replicas": 2}})
        changed = await converged(admin, ns, within=120, replicas={first[0]: 2})
        assert controller.manager.healthz() == [] and controller.manager.readyz() == []
        figures.append(f"a change afterwards applied in {changed:.1f}s")

    print("\napiserver kill -9: " + "; ".join(figures))
