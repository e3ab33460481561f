"""GPUQuota in the GPU queue, on the full tier's kwok GPU nodes (3 GPUs in all): a team's services
run within its quota; the next one waits (WaitingForGPU, reason QuotaExceeded, naming the quota and
the need) with a queue position, and starts as soon as the quota allows: a service of the team
deleted, the quota raised. Many services created at once never take the team past its quota, at
any moment (every Deployment version is watched). A service below the quota's minPriority is
refused; an HPA gets a maxReplicas no higher than the quota admits. The quota's status lists the
holders and the waiters."""

import contextlib
import http.client
import json
import socket
import threading
import urllib.parse
from typing import Any

import pytest
from e2e_support import (
    API,
    MERGE,
    RunningController,
    delete_services_and_wait,
    eventually,
    eventually_equal,
    gpus_idle,
    hf_model,
    isvc,
    phase_is,
    poll,
    status_of,
)
from llmkube_testing.rest import KubeRest

QUOTA = "team"


def gpu_service(name: str, gpus: int = 1, **spec: Any) -> dict[str, Any]:
    return isvc(name, modelRef="gpu-model", skipModelInit=True, resources={"gpu": gpus}, **spec)


def gpu_quota(namespace: str, gpus: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "GPUQuota",
        "metadata": {"name": QUOTA},
        "spec": {"namespaceRef": namespace, "gpuCount": gpus, **spec},
    }


def quota_status(admin: KubeRest, namespace: str) -> dict[str, Any]:
    return status_of(admin, "GPUQuota", QUOTA, namespace)


def waiting_on_quota(admin: KubeRest, name: str, namespace: str) -> Any:
    def check() -> dict[str, Any] | None:
        status = status_of(admin, "InferenceService", name, namespace)
        waiting = status.get("phase") == "WaitingForGPU" and status.get("schedulingStatus") == "QuotaExceeded"
        return status if waiting else None

    return check


def deployment_replicas(admin: KubeRest, name: str, namespace: str) -> int | None:
    deployment = admin.get_or_none("apps/v1", "Deployment", name, namespace)
    return None if deployment is None else int(deployment["spec"].get("replicas", 1))


class DeploymentsWatch:
    """Every version of every Deployment of a namespace, in order, from a list then a watch."""

    def __init__(self, admin: KubeRest, namespace: str) -> None:
        self.admin, self.namespace = admin, namespace
        self.events: list[tuple[str, dict[str, Any]]] = []
        self._connection: http.client.HTTPSConnection | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> "DeploymentsWatch":
        path = self.admin.path_for("apps/v1", "Deployment", self.namespace)
        listed = self.admin.request("GET", path)
        self.events += [("ADDED", item) for item in listed["items"]]
        query = urllib.parse.urlencode(
            {"watch": "1", "resourceVersion": listed["metadata"]["resourceVersion"], "timeoutSeconds": "240"}
        )
        server = urllib.parse.urlsplit(self.admin.server)
        self._connection = http.client.HTTPSConnection(
            server.hostname or "127.0.0.1", server.port, context=self.admin.ssl_context, timeout=240
        )
        headers = {"Authorization": f"Bearer {self.admin.token}"} if self.admin.token else {}
        self._connection.request("GET", f"{path}?{query}", headers=headers)
        response = self._connection.getresponse()
        assert response.status == 200, response.read()
        self._thread = threading.Thread(target=self._read, args=(response,), daemon=True)
        self._thread.start()
        return self

    def _read(self, response: http.client.HTTPResponse) -> None:
        with contextlib.suppress(Exception):  # the connection is shut down by stop()
            for line in response:
                event = json.loads(line)
                self.events.append((event["type"], event["object"]))

    def stop(self) -> None:
        sock = self._connection.sock if self._connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._connection is not None:
            self._connection.close()

    def most_replicas_at_once(self) -> int:
        """The largest sum of spec.replicas over the namespace's Deployments at any moment."""
        current: dict[str, int] = {}
        most = 0
        for kind, obj in list(self.events):
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                current.pop(name, None)
            elif kind in ("ADDED", "MODIFIED"):
                current[name] = int(obj["spec"].get("replicas", 1))
            most = max(most, sum(current.values()))
        return most


@pytest.fixture
async def team(operator: RunningController, full_namespace: str) -> Any:
    """An idle cluster's GPUs, a GPU Model in the namespace; the services and their pods gone after."""
    admin = operator.cluster.admin()
    await gpus_idle(admin)
    admin.create(hf_model("gpu-model", hardware={"accelerator": "cuda"}), namespace=full_namespace)
    yield admin
    await delete_services_and_wait(operator, full_namespace, pods_too=True)


async def test_a_team_runs_within_its_quota_and_waiters_start_when_it_allows(
    operator: RunningController, full_namespace: str, team: KubeRest
) -> None:
    admin, ns = team, full_namespace
    admin.create(gpu_quota(ns, 2), namespace=ns)
    await eventually(
        lambda: quota_status(admin, ns).get("observedGeneration") == 1, what="the quota's first status"
    )
    for name in ("a", "b"):
        admin.create(gpu_service(name), namespace=ns)
        await eventually(phase_is(admin, "InferenceService", name, ns, "Ready"), what=f"{name} Ready")

    # The third would take the team past 2 GPUs: it waits, naming the quota and the need, and has no pod.
    admin.create(gpu_service("c"), namespace=ns)
    waiting = await eventually(waiting_on_quota(admin, "c", ns), what="c waiting on the quota")
    assert waiting["schedulingMessage"] == "GPUQuota team uses 2 of 2 GPUs, this replica needs 1"
    assert waiting["queuePosition"] >= 1
    assert waiting["waitingFor"] == "nvidia.com/gpu: 1"
    assert deployment_replicas(admin, "c", ns) == 0
    assert not admin.list("v1", "Pod", ns, label_selector="inference.llmkube.dev/service=c")
    gpu = {c["type"]: c for c in waiting["conditions"]}["GPUAvailable"]
    assert (gpu["status"], gpu["reason"]) == ("False", "QuotaExceeded")

    def quota_says(used: int, holders: list[str], waiters: list[str]) -> Any:
        def check() -> bool:
            status = quota_status(admin, ns)
            return (
                status.get("usedGPUCount") == used
                and [h["name"] for h in status.get("holders") or []] == holders
                and [w["name"] for w in status.get("waiters") or []] == waiters
                and status.get("waiting") == len(waiters)
            )

        return check

    await eventually(quota_says(2, ["a", "b"], ["c"]), what="the quota's holders a, b and waiter c")
    status = quota_status(admin, ns)
    (waiter,) = status["waiters"]
    assert (waiter["needsGPUs"], waiter["reason"]) == (1, "QuotaExceeded")
    ready = {c["type"]: c for c in status["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "Enforced")

    # A service of the team deleted: c takes its place. (Its Deployment deleted as the garbage
    # collector would, whose first pass over a CRD's dependents can wait for a 30 s resync: its pod
    # would keep the GPU c's pod needs, and collection is not this test's subject.)
    admin.delete(API, "InferenceService", "a", ns)
    store = operator.controllers.inference_services.services.store
    await poll(lambda: store.get_object(ns, "a") is None, what="a gone from the cache")
    admin.delete("apps/v1", "Deployment", "a", ns)
    await eventually(phase_is(admin, "InferenceService", "c", ns, "Ready"), what="c Ready once a is gone")
    await eventually(quota_says(2, ["b", "c"], []), what="the quota's holders b, c")

    # The quota raised: the next waiter starts.
    admin.create(gpu_service("d"), namespace=ns)
    await eventually(waiting_on_quota(admin, "d", ns), what="d waiting on the quota")
    admin.request(
        "PATCH",
        admin.path_for(API, "GPUQuota", ns, QUOTA),
        {"spec": {"gpuCount": 3}},
        content_type=MERGE,
    )
    await eventually(
        phase_is(admin, "InferenceService", "d", ns, "Ready"), what="d Ready once the quota is 3"
    )
    await eventually(quota_says(3, ["b", "c", "d"], []), what="the quota's holders b, c, d")


async def test_many_services_created_at_once_never_pass_the_quota(
    operator: RunningController, full_namespace: str, team: KubeRest
) -> None:
    admin, ns = team, full_namespace
    admin.create(gpu_quota(ns, 2), namespace=ns)
    await eventually(
        lambda: quota_status(admin, ns).get("observedGeneration") == 1, what="the quota's status"
    )
    watch = DeploymentsWatch(admin, ns).start()
    try:
        names = [f"burst-{i}" for i in range(6)]
        for name in names:
            admin.create(gpu_service(name), namespace=ns)

        def settled_split() -> bool:
            phases = [status_of(admin, "InferenceService", n, ns).get("phase") for n in names]
            return phases.count("Ready") == 2 and phases.count("WaitingForGPU") == 4

        await eventually(settled_split, what="2 services Ready and 4 waiting on the quota")
        waiting = [n for n in names if waiting_on_quota(admin, n, ns)()]
        assert len(waiting) == 4
        # Each its own place in the queue (a position that only moved is written within 5 s).
        await eventually_equal(
            lambda: sorted(
                status_of(admin, "InferenceService", n, ns).get("queuePosition", 0) for n in waiting
            ),
            [1, 2, 3, 4],
            what="the waiters' queue positions",
        )
        # Every Deployment version the API server ever held: never more than 2 replicas together.
        await eventually_equal(
            lambda: sum(deployment_replicas(admin, n, ns) or 0 for n in names), 2, what="replicas admitted"
        )
        assert watch.most_replicas_at_once() == 2
        pods = admin.list("v1", "Pod", ns, label_selector="inference.llmkube.dev/service")
        assert len(pods) == 2
    finally:
        watch.stop()


async def test_below_min_priority_is_refused(
    operator: RunningController, full_namespace: str, team: KubeRest
) -> None:
    admin, ns = team, full_namespace
    admin.create(gpu_quota(ns, 2, minPriority="high"), namespace=ns)
    admin.create(gpu_service("low", priority="low"), namespace=ns)
    admin.create(gpu_service("high", priority="high"), namespace=ns)
    failed = await eventually(phase_is(admin, "InferenceService", "low", ns, "Failed"), what="low refused")
    assert failed["schedulingStatus"] == "BelowQuotaPriority"
    degraded = {c["type"]: c for c in failed["conditions"]}["Degraded"]
    assert (
        degraded["message"] == "GPUQuota team admits priority high and above; this service's priority is low"
    )
    assert admin.get_or_none("apps/v1", "Deployment", "low", ns) is None
    await eventually(phase_is(admin, "InferenceService", "high", ns, "Ready"), what="high Ready")


async def test_an_hpa_never_scales_past_the_quota(
    operator: RunningController, full_namespace: str, team: KubeRest
) -> None:
    admin, ns = team, full_namespace
    admin.create(gpu_quota(ns, 2), namespace=ns)
    admin.create(
        gpu_service("scaled", replicas=1, autoscaling={"minReplicas": 1, "maxReplicas": 5}), namespace=ns
    )

    def hpa_max() -> int | None:
        hpa = admin.get_or_none("autoscaling/v2", "HorizontalPodAutoscaler", "scaled", ns)
        return None if hpa is None else int(hpa["spec"]["maxReplicas"])

    await eventually_equal(hpa_max, 2, what="the HPA's maxReplicas, capped by the quota")
    # The rest of its ceiling waits on the quota, which lists it.
    await eventually(
        lambda: [w["name"] for w in quota_status(admin, ns).get("waiters") or []] == ["scaled"],
        what="the HPA service waiting for the rest of its ceiling",
    )
