"""API errors injected between the controller and the API server: 30 % and then 80 % of its
requests answered with 429 (with Retry-After), 500, 503 or a connection reset, while it converges
new services and changes to existing ones. Its request rate stays bounded (retries back off, no
hot loop), it never crashes, and once the faults stop everything converges and it goes quiet.
Prints the figures (run with -s)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path

import pytest
from fault_support import (
    converged,
    create_services,
    in_process,
    long_or,
    merge_patch,
    poll,
    quiesced,
    rate,
)
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.controller_harness import reconcile_log
from llmkube_testing.faultproxy import FAULTS, FaultProxy

from llmkube.kube.types import ObjectKey

#: requests per second the controller may send while faults rain on it (it sends about 1/s when
#: idle-converged with these services, tens while converging): a hot loop would be hundreds
RATE_BOUND = 30.0
#: ...and in any one second (the burst right after the changes arrive): a retry loop without
#: backoff would send hundreds
PEAK_BOUND = 90


@pytest.mark.parametrize("probability", [0.3, 0.8])
async def test_injected_api_errors_are_retried_with_bounded_rate_and_converge_after(
    fault_cluster: LocalCluster, fault_namespace: str, tmp_path: Path, probability: float
) -> None:
    admin = fault_cluster.admin()
    ns = fault_namespace
    existing = [f"existing-{i}" for i in range(long_or(5, 20))]
    new = [f"new-{i}" for i in range(long_or(5, 20))]
    window = long_or(20.0, 120.0)
    assert fault_cluster.controller_kubeconfig is not None
    proxy = await FaultProxy.start(
        fault_cluster.server, fault_cluster.workdir / "pki", seed=int(probability * 100)
    )
    try:
        kubeconfig = proxy.kubeconfig(fault_cluster.controller_kubeconfig, tmp_path / "via-proxy.kubeconfig")
        async with in_process(kubeconfig) as controller:
            create_services(admin, ns, existing)
            await converged(admin, ns, within=120)

            proxy.inject(probability, FAULTS)
            started = time.monotonic()
            create_services(admin, ns, new)
            for name in existing:
                merge_patch(admin, "InferenceService", name, ns, {"spec": {"replicas": 2}})
            per_second: list[int] = []
            while time.monotonic() - started < window:
                second = time.monotonic()
                await asyncio.sleep(1.0)
                per_second.append(len(proxy.requests_between(second, time.monotonic())))
                assert controller.manager.healthz() == [], controller.manager.healthz()
            faulty = proxy.requests_between(started, time.monotonic())
            proxy.inject(0.0)
            stopped = time.monotonic()

            replicas = {name: 2 for name in existing}
            settled = await converged(admin, ns, within=180, replicas=replicas)
            await quiesced(controller.requests, within=60)
            quiet_from = len(proxy.log)
            # Converged and quiet: every service reconciled once more (through the proxy, faults
            # off) and every Event written, and only watches may have been (re)opened meanwhile.
            services = controller.controllers.inference_services.controller
            log = reconcile_log(services)
            keys = [ObjectKey(ns, name) for name in existing + new]
            before = {key: log(key) for key in keys}
            for key in keys:
                services.enqueue(key)
            await poll(
                lambda: all(log(key) > before[key] for key in keys),
                within=60,
                what="every service reconciled",
            )
            await controller.idle()
            later = [p for p in proxy.log[quiet_from:] if not p.watch]
            assert later == [], later
    finally:
        await proxy.close()
    outcomes = Counter(p.outcome for p in faulty)
    injected = sum(p.injected for p in faulty)
    average = rate(len(faulty), stopped - started)
    print(
        f"\ninjected faults at {probability:.0%} for {window:.0f}s: {len(faulty)} requests "
        f"({average:.1f}/s on average, at most {max(per_second)} in one second), {injected} answered by "
        f"the proxy {dict(sorted(outcomes.items()))}; {len(existing) + len(new)} services converged "
        f"{settled:.1f}s after the faults stopped, then quiet"
    )
    assert average <= RATE_BOUND
    assert max(per_second) <= PEAK_BOUND
    assert injected > 0
