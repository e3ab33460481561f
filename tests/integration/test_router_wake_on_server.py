"""Two `llmkube router` replicas wake a sleeping InferenceService once, against the real API server,
each with the Role the controller gives router pods (plan/router/permissions.py) and nothing else:
20 requests sent at once, half to each replica, are held; of the two replicas' scale writes exactly
one changes the Deployment (0 -> 1, its generation up by one), the other reads 1 and stops; once the
pod's endpoint is ready every request is answered, streams included; the last request time is
shared on the InferenceService. A Deployment its HPA already took further is never scaled down.

The API tier has no controllers: the Deployment, the InferenceService's status and the pod's
EndpointSlice are written by the test, as the controller, the Deployment controller and the
EndpointSlice controller would."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from llmkube_testing.identities import service_account_kubeconfig
from llmkube_testing.openai_upstream import Upstream, outbound_address
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest

from llmkube.api import constants as c
from llmkube.api.crds import all_crds
from llmkube.plan.inferenceservice.names import service_name
from llmkube.plan.router.permissions import role_rules
from llmkube.router.process import RouterProcess, RouterSettings

CHAT = "/v1/chat/completions"
RBAC = "rbac.authorization.k8s.io/v1"
ROUTER = "front"
ACCOUNT = f"{ROUTER}-router-proxy"


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": {c.ANNOTATION_SCALED_TO_ZERO: "2026-01-01T00:00:00Z"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "server", "image": "localhost/llama-server:cpu"}]},
            },
        },
    }


def _isvc(name: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.ISVC_KIND,
        "metadata": {"name": name, "annotations": {c.ANNOTATION_SCALE_TO_ZERO_AFTER: "10m"}},
        "spec": {"modelRef": name},
    }


ASLEEP = {
    "status": {
        "phase": "Stopped",
        "conditions": [
            {
                "type": c.CONDITION_SCALED_TO_ZERO,
                "status": "True",
                "reason": "Idle",
                "message": "Scaled to zero: no request for 10m0s",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
    }
}


def _router(*backends: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.ROUTER_KIND,
        "metadata": {"name": ROUTER},
        "spec": {
            "backends": [{"name": b, "inferenceServiceRef": {"name": b}} for b in backends],
            "rules": [{"name": b, "match": {"models": [b]}, "route": {"backends": [b]}} for b in backends],
            "defaultRoute": backends[0],
        },
    }


def _slice(service: str, address: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-pod", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


async def _eventually(check: Callable[[], Any], within: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + within
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"not reached in time: {what}"
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def _routers(kubeconfig: Path, namespace: str, count: int) -> AsyncIterator[list[RouterProcess]]:
    processes = [
        RouterProcess(
            RouterSettings(
                name=ROUTER,
                namespace=namespace,
                kubeconfig=str(kubeconfig),
                host="127.0.0.1",
                port=0,
                drain_delay=0.0,
                shutdown_grace=5.0,
                handle_signals=False,
                wake_timeout=30.0,
                activity_interval=1.0,
            )
        )
        for _ in range(count)
    ]
    tasks = [asyncio.get_running_loop().create_task(p.run()) for p in processes]
    try:
        for process in processes:
            await asyncio.wait_for(process.started.wait(), 30)
        yield processes
    finally:
        for process in processes:
            process.request_stop()
        await asyncio.wait_for(asyncio.gather(*tasks), 30)


def _url(process: RouterProcess) -> str:
    assert process.address is not None
    return f"http://127.0.0.1:{process.address[1]}"


async def _chat(session: aiohttp.ClientSession, url: str, model: str, stream: bool) -> tuple[int, bytes]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    async with session.post(url + CHAT, json=body) as answer:
        return answer.status, await answer.read()


async def test_two_router_replicas_wake_a_sleeping_service_with_one_scale_write(
    api_cluster: ClusterHandle, namespace: str, tmp_path: Path
) -> None:
    address = outbound_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    apply_manifests(api_cluster, all_crds())
    admin: KubeRest = api_cluster.admin()
    for name, replicas in (("sleepy", 0), ("busy", 3)):
        admin.create(_deployment(name, replicas), namespace=namespace)
        admin.create(_isvc(name), namespace=namespace)
        admin.request(
            "PATCH",
            admin.path_for(c.API_VERSION, c.ISVC_KIND, namespace, name) + "/status",
            ASLEEP,
            content_type="application/merge-patch+json",
        )
    admin.create(_router("sleepy", "busy"), namespace=namespace)
    # The router's own account, with the Role the controller makes for it and nothing else.
    identity = service_account_kubeconfig(
        api_cluster.kubeconfig, namespace, ACCOUNT, tmp_path / "router.kubeconfig"
    )
    admin.create(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": ACCOUNT},
            "rules": role_rules(ROUTER, ["sleepy", "busy"]),
        },
        namespace=namespace,
    )
    admin.create(
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": ACCOUNT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": ACCOUNT, "namespace": namespace}],
        },
        namespace=namespace,
    )
    generation = int(admin.get("apps/v1", "Deployment", "sleepy", namespace)["metadata"]["generation"])
    pod = await Upstream(name="woken", host=address).start()
    try:
        async with _routers(identity, namespace, 2) as routers, aiohttp.ClientSession() as session:
            for process in routers:

                def sees_both_asleep(p: RouterProcess = process) -> bool:
                    found = [p.state.sleepers.get(n) for n in ("sleepy", "busy")]
                    return all(s is not None and s.asleep for s in found)

                await _eventually(sees_both_asleep, what="each replica sees both asleep")
            answers = [
                asyncio.create_task(_chat(session, _url(routers[n % 2]), "sleepy", stream=n % 4 < 2))
                for n in range(20)
            ]
            await _eventually(
                lambda: sum(p.state.wakes.held("sleepy") for p in routers) == 20, what="twenty requests held"
            )
            await _eventually(
                lambda: admin.get("apps/v1", "Deployment", "sleepy", namespace)["spec"]["replicas"] == 1,
                what="the Deployment scaled to 1",
            )
            # The pod turns ready (what the Deployment and EndpointSlice controllers would do).
            await asyncio.to_thread(
                admin.create, _slice(service_name("sleepy"), address, pod.port), namespace=namespace
            )
            results = await asyncio.wait_for(asyncio.gather(*answers), 30)
            assert [status for status, _ in results] == [200] * 20
            assert all(b"data: [DONE]" in body for n, (_, body) in enumerate(results) if n % 4 < 2)
            assert pod.requests == 20
            # One write changed the Deployment; the other replica read 1 and stopped (or, having
            # read 0 too, got a conflict and read again).
            assert sum(p.waker.scaled.get("sleepy", 0) for p in routers if p.waker is not None) == 1
            deployment = admin.get("apps/v1", "Deployment", "sleepy", namespace)
            assert int(deployment["metadata"]["generation"]) == generation + 1
            assert "llmkube-router" in {e["manager"] for e in deployment["metadata"]["managedFields"]}
            # The idle clock: the last request written on the service, by one replica or both.
            stamp = await _eventually(
                lambda: (
                    admin.get(c.API_VERSION, c.ISVC_KIND, "sleepy", namespace)["metadata"].get("annotations")
                    or {}
                ).get(c.ANNOTATION_LAST_REQUEST),
                what="the last request shared",
            )
            assert stamp.endswith("Z")

            # A Deployment already past 0 (its HPA took it to 3) is never scaled down by a wake.
            busy_generation = int(
                admin.get("apps/v1", "Deployment", "busy", namespace)["metadata"]["generation"]
            )
            held = asyncio.create_task(_chat(session, _url(routers[0]), "busy", stream=False))
            await _eventually(lambda: routers[0].state.wakes.held("busy") == 1, what="held for busy")
            await asyncio.sleep(1.0)  # its wake reads the scale, and writes nothing
            held.cancel()
            busy = admin.get("apps/v1", "Deployment", "busy", namespace)
            assert busy["spec"]["replicas"] == 3
            assert int(busy["metadata"]["generation"]) == busy_generation
            assert routers[0].waker is not None and "busy" not in routers[0].waker.scaled
    finally:
        await pod.stop()
