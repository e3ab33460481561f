"""Scale to zero on the full control plane, with the real `llmkube router` in front (its container's
arguments, the ServiceAccount and Role the controller made for it):

* an InferenceService annotated `scale-to-zero-after` sleeps once idle: its Deployment at 0 with
  the mark, its HPA gone, Stopped with the reason ScaledToZero, an Event; then nothing is written
  while it sleeps, by the controller or the router;
* 20 requests at once (half of them streams) are held, the router scales the Deployment from 0 to 1
  exactly once, and every one is answered once the pod is ready (its endpoint: a stand-in on this
  machine's address, as kwok's pods answer nothing); the status and an Event say how long the wake
  took, the HPA is back (min 1), and the router shared the last request time;
* a service whose pod can never start: the wake queue's bound (503 with Retry-After), and a client
  that leaves while it waits is dropped from the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from e2e_support import (
    API,
    RunningController,
    condition_triple,
    eventually,
    hf_model,
    isvc,
    patch,
    settled,
    status_of,
)
from llmkube_testing.identities import service_account_kubeconfig
from llmkube_testing.openai_upstream import Upstream
from router_gateway import ADDRESS

from llmkube.api import constants as c
from llmkube.cli import build_parser
from llmkube.plan.inferenceservice.names import service_name
from llmkube.router.command import router_settings
from llmkube.router.process import RouterProcess

CHAT = "/v1/chat/completions"
HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")
#: the kwok CPU node (llmkube_testing.cluster)
NODE = "kwok-cpu-0"

pytestmark = pytest.mark.skipif(ADDRESS is None, reason="this machine has no address but loopback")


def sleepy(name: str, after: str = "8s", **spec: Any) -> dict[str, Any]:
    found = isvc(name, modelRef="m", skipModelInit=True, **spec)
    found["metadata"]["annotations"] = {c.ANNOTATION_SCALE_TO_ZERO_AFTER: after}
    return found


def front(*backends: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": c.ROUTER_KIND,
        "metadata": {"name": "front"},
        "spec": {
            "backends": [{"name": b, "inferenceServiceRef": {"name": b}} for b in backends],
            "rules": [{"name": b, "match": {"models": [b]}, "route": {"backends": [b]}} for b in backends],
            "defaultRoute": backends[0],
        },
    }


def slice_for(service: str, address: str, port: int, *, ready: bool) -> dict[str, Any]:
    """The endpoint the woken pod stands for (kwok's pods answer nothing): a stand-in on this machine."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-stand-in", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": ready}}],
    }


@contextlib.asynccontextmanager
async def router_pod(
    operator: RunningController, namespace: str, workdir: Path, *extra: str
) -> AsyncIterator[tuple[RouterProcess, str]]:
    """`llmkube router` as the controller's Deployment runs it, with the ServiceAccount it made."""
    admin = operator.cluster.admin()

    def deployment() -> dict[str, Any] | None:
        return admin.get_or_none("apps/v1", "Deployment", "front-router-proxy", namespace)

    container = (await eventually(deployment, within=60, what="the router's Deployment"))["spec"]["template"][
        "spec"
    ]["containers"][0]
    identity = service_account_kubeconfig(
        operator.cluster.kubeconfig, namespace, "front-router-proxy", workdir / "router.kubeconfig"
    )
    args = build_parser().parse_args(
        [
            "router",
            *container["args"],
            f"--namespace={namespace}",
            f"--kubeconfig={identity}",
            f"--secrets-dir={workdir / 'secrets'}",
            "--listen=127.0.0.1:0",
            "--endpoint-wait=1",
            "--activity-interval=1",
            *extra,
        ]
    )
    settings = router_settings(args)
    settings.drain_delay, settings.shutdown_grace, settings.handle_signals = 0.0, 5.0, False
    process = RouterProcess(settings)
    task = asyncio.get_running_loop().create_task(process.run())
    try:
        await asyncio.wait_for(process.started.wait(), 30)
        assert process.address is not None
        yield process, f"http://127.0.0.1:{process.address[1]}"
    finally:
        process.request_stop()
        await asyncio.wait_for(task, 30)


async def chat(
    session: aiohttp.ClientSession, url: str, model: str, *, stream: bool = False
) -> tuple[int, dict[str, str], bytes]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    async with session.post(url + CHAT, json=body) as answer:
        return answer.status, dict(answer.headers), await answer.read()


def asleep(admin: Any, name: str, namespace: str) -> dict[str, Any] | None:
    status = status_of(admin, "InferenceService", name, namespace)
    slept = condition_triple(status, c.CONDITION_SCALED_TO_ZERO)
    if status.get("phase") == "Stopped" and slept is not None and slept[0] == "True":
        return status
    return None


def events_of(admin: Any, namespace: str, name: str) -> list[str]:
    return [
        e["reason"]
        for e in admin.list("events.k8s.io/v1", "Event", namespace)
        if (e.get("regarding") or {}).get("name") == name
        and e.get("regarding", {}).get("kind") == "InferenceService"
    ]


async def test_an_idle_service_sleeps_and_twenty_requests_wake_it_with_one_scale_write(
    operator: RunningController, full_namespace: str, tmp_path: Path
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    assert ADDRESS is not None
    pod = await Upstream(name="woken-pod", host=ADDRESS).start()
    # Its pod runs only once a node has this label: until then the stand-in alone is its endpoint
    # (a kwok pod's address answers nothing of ours), and the label comes once every request is in.
    label = f"llmkube-test/wake-{ns}"
    try:
        admin.create(hf_model("m"), namespace=ns)
        admin.create(
            sleepy("sleepy", autoscaling={"minReplicas": 1, "maxReplicas": 3}, nodeSelector={label: "true"}),
            namespace=ns,
        )
        admin.create(front("sleepy"), namespace=ns)
        admin.create(slice_for(service_name("sleepy"), ADDRESS, pod.port, ready=False), namespace=ns)

        # Asleep once idle: Deployment at 0 with the mark, the HPA gone, Stopped/ScaledToZero, an Event.
        status = await eventually(lambda: asleep(admin, "sleepy", ns), within=60, what="sleepy asleep")
        assert status["schedulingStatus"] == "ScaledToZero"
        assert condition_triple(status, "Available")[:2] == ("False", "ScaledToZero")  # type: ignore[index]
        deployment = admin.get("apps/v1", "Deployment", "sleepy", ns)
        assert deployment["spec"]["replicas"] == 0
        assert c.ANNOTATION_SCALED_TO_ZERO in deployment["metadata"]["annotations"]
        await eventually(lambda: admin.get_or_none(*HPA, "sleepy", ns) is None, within=30, what="HPA gone")
        await eventually(
            lambda: "ScaledToZero" in events_of(admin, ns, "sleepy"), within=30, what="the Event"
        )
        printed = admin.request(
            "GET",
            admin.path_for(API, "InferenceService", ns, "sleepy"),
            accept="application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        columns = [column["name"] for column in printed["columnDefinitions"]]
        assert printed["rows"][0]["cells"][columns.index("Phase")] == "Stopped"

        async with (
            router_pod(operator, ns, tmp_path, "--wake-timeout=60", "--wake-queue=25") as (process, url),
            aiohttp.ClientSession() as session,
        ):
            await eventually(
                lambda: process.state.sleepers.get("sleepy"), within=30, what="the router sees it"
            )
            # Quiet while it sleeps: neither the controller nor the router writes anything.
            await eventually(
                lambda: (
                    not admin.list("v1", "Pod", ns, label_selector="inference.llmkube.dev/service=sleepy")
                ),
                within=60,
                what="its pod gone",
            )
            await eventually(
                lambda: status_of(admin, "InferenceService", "sleepy", ns).get("replicas") == 0,
                within=30,
                what="no replica counted",
            )
            await settled(operator.controllers.inference_services.controller)
            before = (
                admin.get(API, "InferenceService", "sleepy", ns)["metadata"]["resourceVersion"],
                admin.get("apps/v1", "Deployment", "sleepy", ns)["metadata"]["resourceVersion"],
            )
            generation = int(admin.get("apps/v1", "Deployment", "sleepy", ns)["metadata"]["generation"])
            await asyncio.sleep(2.5)
            assert before == (
                admin.get(API, "InferenceService", "sleepy", ns)["metadata"]["resourceVersion"],
                admin.get("apps/v1", "Deployment", "sleepy", ns)["metadata"]["resourceVersion"],
            )

            started = time.monotonic()
            answers = [
                asyncio.create_task(chat(session, url, "sleepy", stream=n % 2 == 0)) for n in range(20)
            ]
            await eventually(
                lambda: process.state.wakes.held("sleepy") == 20, within=15, what="twenty requests held"
            )
            await eventually(
                lambda: admin.get("apps/v1", "Deployment", "sleepy", ns)["spec"]["replicas"] == 1,
                within=15,
                what="the router's scale write",
            )
            # The woken pod's endpoint turns ready (a stand-in: kwok's pod is not even scheduled).
            patch(
                admin, "discovery.k8s.io/v1", "EndpointSlice", f"{service_name('sleepy')}-stand-in", ns,
                {"endpoints": [{"addresses": [ADDRESS], "conditions": {"ready": True}}]},
            )  # fmt: skip
            results = await asyncio.wait_for(asyncio.gather(*answers), 60)
            assert [status for status, _, _ in results] == [200] * 20
            assert all(b"data: [DONE]" in body for n, (_, _, body) in enumerate(results) if n % 2 == 0)
            assert time.monotonic() - started < 60
            assert process.waker is not None
            assert process.waker.scaled == {"sleepy": 1}
            assert pod.requests == 20
            # Now its pod may run (kwok's node gets the label): it turns ready, and the wake is over.
            patch(admin, "v1", "Node", NODE, None, {"metadata": {"labels": {label: "true"}}})

            # Awake: the status and an Event say how long the wake took; the HPA is back (min 1).
            def awake() -> tuple[str, str, str] | None:
                found = condition_triple(
                    status_of(admin, "InferenceService", "sleepy", ns), c.CONDITION_SCALED_TO_ZERO
                )
                return found if found is not None and found[1] == "Awake" and "ready" in found[2] else None

            woke = await eventually(awake, within=60, what="sleepy awake")
            assert woke[0] == "False" and "after the wake" in woke[2]
            await eventually(
                lambda: "Woke" in events_of(admin, ns, "sleepy"), within=30, what="the Woke Event"
            )
            assert "Waking" in events_of(admin, ns, "sleepy")
            hpa = await eventually(
                lambda: admin.get_or_none(*HPA, "sleepy", ns), within=30, what="the HPA back"
            )
            assert hpa["spec"]["minReplicas"] == 1
            deployment = admin.get("apps/v1", "Deployment", "sleepy", ns)
            # Two changes since it slept: the router's 0 -> 1, and the controller's apply that takes
            # the mark off (a Deployment's generation counts its annotations too).
            assert int(deployment["metadata"]["generation"]) == generation + 2
            assert c.ANNOTATION_SCALED_TO_ZERO not in (deployment["metadata"].get("annotations") or {})
            managers = {entry["manager"] for entry in deployment["metadata"]["managedFields"]}
            assert "llmkube-router" in managers
            # The routers' shared clock: the last request written on the service.
            annotations = await eventually(
                lambda: (
                    (
                        a := admin.get(API, "InferenceService", "sleepy", ns)["metadata"].get("annotations")
                        or {}
                    ).get(c.ANNOTATION_LAST_REQUEST)
                    and a
                ),
                within=15,
                what="the last request shared",
            )
            assert annotations[c.ANNOTATION_LAST_REQUEST].endswith("Z")
    finally:
        patch(admin, "v1", "Node", NODE, None, {"metadata": {"labels": {label: None}}})
        await pod.stop()


async def test_the_wake_queue_is_bounded_and_a_client_that_leaves_is_dropped(
    operator: RunningController, full_namespace: str, tmp_path: Path
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    # Its pod can never be scheduled: a wake never completes, and requests stay held.
    admin.create(sleepy("stuck", nodeSelector={"llmkube-test/nowhere": "true"}), namespace=ns)
    admin.create(front("stuck"), namespace=ns)
    await eventually(lambda: asleep(admin, "stuck", ns), within=60, what="stuck asleep")
    async with (
        router_pod(operator, ns, tmp_path, "--wake-timeout=60", "--wake-queue=3") as (process, url),
        aiohttp.ClientSession() as session,
    ):
        await eventually(lambda: process.state.sleepers.get("stuck"), within=30, what="the router sees it")
        held = [asyncio.create_task(chat(session, url, "stuck", stream=n == 0)) for n in range(3)]
        await eventually(lambda: process.state.wakes.held("stuck") == 3, within=15, what="three held")
        status, headers, body = await chat(session, url, "stuck")
        assert status == 503 and headers["Retry-After"] == "5" and b'"waking"' in body
        held[1].cancel()
        await eventually(lambda: process.state.wakes.held("stuck") == 2, within=15, what="one dropped")
        held.append(asyncio.create_task(chat(session, url, "stuck")))
        await eventually(lambda: process.state.wakes.held("stuck") == 3, within=15, what="its place taken")
        await eventually(
            lambda: admin.get("apps/v1", "Deployment", "stuck", ns)["spec"]["replicas"] == 1,
            within=15,
            what="the wake's scale write",
        )
        assert process.waker is not None and process.waker.scaled == {"stuck": 1}
        assert all(not task.done() for n, task in enumerate(held) if n != 1)
        for task in held:
            task.cancel()
        await eventually(lambda: process.state.wakes.held("stuck") == 0, within=15, what="all dropped")
