"""Helpers shared by the end-to-end tests (the fixtures live in conftest.py)."""

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing.controller_harness import ControllerHarness, controller_running, idle, reconcile_log
from llmkube_testing.pytest_plugin import ClusterHandle
from llmkube_testing.request_log import RequestLog
from llmkube_testing.rest import KubeRest, load_yaml_documents, wait_until

from llmkube.controllers.setup import Controllers, ControllersConfig
from llmkube.kube.control import Controller
from llmkube.kube.rest import ApiClient
from llmkube.kube.types import ObjectKey
from llmkube.manager import Manager

ROOT = Path(__file__).resolve().parents[2]

API = "inference.llmkube.dev/v1alpha1"


@dataclass
class RunningController:
    """The session's controller (llmkube_testing.controller_harness) and where it runs."""

    harness: ControllerHarness
    cluster: ClusterHandle
    model_cache: Path

    @property
    def manager(self) -> Manager:
        return self.harness.manager

    @property
    def controllers(self) -> Controllers:
        return self.harness.controllers

    @property
    def config(self) -> ControllersConfig:
        return self.harness.config

    @property
    def client(self) -> ApiClient:
        return self.harness.client

    @property
    def requests(self) -> RequestLog:
        return self.harness.requests

    def mutating_requests(self, namespace: str | None = None) -> int:
        return self.requests.mutating_requests(namespace)


async def eventually(check: Callable[[], Any], *, within: float = 60, what: str = "condition") -> Any:
    """Poll `check` (a sync function) without blocking the event loop the controller runs on."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: wait_until(check, timeout=within, what=what))


async def eventually_equal(
    get: Callable[[], Any], expected: Any, *, within: float = 60, what: str = "value"
) -> None:
    """Poll until `get()` returns `expected`; on timeout, say what it returned last."""
    last: list[Any] = []

    def check() -> bool:
        last[:] = [get()]
        return bool(last[0] == expected)

    try:
        await eventually(check, within=within, what=what)
    except TimeoutError as error:
        seen = last[0] if last else None
        raise AssertionError(f"{what}: wanted {expected!r}, last saw {seen!r}") from error


def isvc(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name}, "spec": spec}


def model(name: str, source: str = "https://models.invalid/tiny.gguf", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name},
        "spec": {"source": source, **spec},
    }


def status_of(admin: KubeRest, kind: str, name: str, namespace: str) -> dict[str, Any]:
    obj = admin.get_or_none(API, kind, name, namespace)
    return (obj or {}).get("status") or {}


GPU = "nvidia.com/gpu"
GPU_TOLERATION = {"key": GPU, "operator": "Equal", "value": "present", "effect": "NoSchedule"}
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def hf_model(name: str, **spec: Any) -> dict[str, Any]:
    """A Model whose source is a HuggingFace repo id: Ready at once (the runtime would fetch it), no
    cache PVC, no network. Services using it set skipModelInit so they get no init container."""
    return model(name, source=f"e2e-org/{name}", **spec)


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status.get("conditions") or []}


def condition_triple(status: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    found = conditions(status).get(type_)
    return (found["status"], found["reason"], found["message"]) if found else None


def patch(
    admin: KubeRest,
    api_version: str,
    kind: str,
    name: str,
    namespace: str | None,
    body: dict[str, Any],
    *,
    content_type: str = MERGE,
    field_manager: str = "e2e-human",
    subresource: str = "",
) -> dict[str, Any]:
    path = admin.path_for(api_version, kind, namespace, name) + (f"/{subresource}" if subresource else "")
    query = {"fieldManager": field_manager}
    return admin.request("PATCH", path, body, content_type=content_type, query=query)


def patch_isvc(admin: KubeRest, name: str, namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    return patch(admin, API, "InferenceService", name, namespace, {"spec": spec})


def phase_is(admin: KubeRest, kind: str, name: str, namespace: str, phase: str) -> Callable[[], Any]:
    """A check for `eventually`: the object's status once its phase is `phase`."""

    def check() -> dict[str, Any] | None:
        status = status_of(admin, kind, name, namespace)
        return status if status.get("phase") == phase else None

    return check


async def settled(controller: Controller, *, within: float = 30) -> None:
    """Wait until the controller has no ready key and none in flight. After `enqueue(key)` this
    means a reconcile of `key` that started after the enqueue has finished."""
    await idle([controller], within=within)


async def reconcile_now(controller: Controller, *keys: ObjectKey, within: float = 30) -> None:
    """Enqueue the keys and wait until those reconciles are done."""
    for key in keys:
        controller.enqueue(key)
    await asyncio.sleep(0)  # let the workers pick them up
    await settled(controller, within=within)


#: Names no object: its reconcile finds nothing in the cache and does nothing.
WITNESS = "no-such-object-witness"


async def worked_through(controller: Controller, namespace: str, *, within: float = 30) -> None:
    """After an observation window: the controller has worked since. A key enqueued now is
    reconciled (one that names no object, so its reconcile does nothing) and afterwards nothing is
    ready or in flight: every requeue that came due in the window has been reconciled and counted,
    however slowly the machine ran. Only then does "not reconciled again" mean something."""
    key = ObjectKey(namespace, WITNESS)
    log = reconcile_log(controller)
    before = log(key)
    controller.enqueue(key)
    await poll(lambda: log(key) > before, within=within, what=f"{controller.name} reconciled the witness key")
    await settled(controller, within=within)


async def watch_reaches(watch: "StatusWatch", resource_version: str, *, within: float = 30) -> None:
    """Wait until `watch` has delivered the object at `resource_version` (read from the API server
    just before): every write up to then has been seen, so counting what it saw means something."""
    await poll(
        lambda: any(o["metadata"]["resourceVersion"] == resource_version for o in list(watch.objects)),
        within=within,
        what=f"the watch of {watch.kind} {watch.name} at resourceVersion {resource_version}",
    )


async def writes_quiesce(
    operator: RunningController, *, quiet_for: float = 2.0, within: float = 60, namespace: str | None = None
) -> int:
    """Wait until the controller has made no mutating request (in `namespace`, when given) for
    `quiet_for` seconds (garbage of earlier tests' namespaces can still be settling); returns the
    mutating-request count."""
    deadline = time.monotonic() + within
    last, since = operator.mutating_requests(namespace), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        now_count = operator.mutating_requests(namespace)
        if now_count != last:
            last, since = now_count, time.monotonic()
        elif time.monotonic() - since >= quiet_for:
            return now_count
    raise TimeoutError(f"the controller kept writing for {within}s")


@contextlib.asynccontextmanager
async def restarted_controller(
    operator: RunningController, namespace: str
) -> AsyncIterator[ControllerHarness]:
    """The whole controller again, as at a restart: its own client, caches and queues, the session
    controller's own configuration, scoped to one namespace, leader election off (the session's
    controller keeps running, and must not be the one that writes either). Its reconciles are
    counted from the first one (`reconcile_log`).

    Its own namespace is that namespace: its list of metal Services (one per controller namespace,
    as the Lease is) would otherwise be the session controller's, which lists every namespace's.
    Its identity gets the Role for that list there, as an install in that namespace would."""
    assert operator.cluster.controller_kubeconfig is not None
    admin = operator.cluster.admin()
    for doc in load_yaml_documents(ROOT / "manifests" / "rbac" / "own_namespace_role.yaml"):
        doc["metadata"]["namespace"] = namespace
        admin.apply(doc)
    config = replace(operator.config, controller_namespace=namespace)
    async with controller_running(
        operator.cluster.controller_kubeconfig, config, namespace=namespace
    ) as restarted:
        yield restarted


class StatusWatch:
    """Every status an object goes through, from a real watch (a list then a watch from its
    resourceVersion), so transient phases such as Creating are seen however short they are."""

    def __init__(self, admin: KubeRest, kind: str, name: str, namespace: str, *, api_version: str = API):
        self.admin, self.kind, self.name, self.namespace = admin, kind, name, namespace
        self.api_version = api_version
        self.statuses: list[dict[str, Any]] = []
        self.objects: list[dict[str, Any]] = []  # every version seen, whole
        self._connection: http.client.HTTPSConnection | None = None
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None

    def start(self) -> "StatusWatch":
        path = self.admin.path_for(self.api_version, self.kind, self.namespace)
        selector = f"metadata.name={self.name}"
        listed = self.admin.request("GET", path, query={"fieldSelector": selector})
        for item in listed["items"]:
            self.objects.append(item)
            self.statuses.append(item.get("status") or {})
        query = urllib.parse.urlencode(
            {
                "watch": "1",
                "fieldSelector": selector,
                "resourceVersion": listed["metadata"]["resourceVersion"],
                "timeoutSeconds": "240",
            }
        )
        server = urllib.parse.urlsplit(self.admin.server)
        self._connection = http.client.HTTPSConnection(
            server.hostname or "127.0.0.1", server.port, context=self.admin.ssl_context, timeout=240
        )
        headers = {"Authorization": f"Bearer {self.admin.token}"} if self.admin.token else {}
        self._connection.request("GET", f"{path}?{query}", headers=headers)
        response = self._connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"watch {path}: HTTP {response.status}: {response.read()!r}")
        self._thread = threading.Thread(target=self._read, args=(response,), name=f"watch-{self.name}")
        self._thread.daemon = True
        self._thread.start()
        return self

    def _read(self, response: http.client.HTTPResponse) -> None:
        try:
            for line in response:
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    self.objects.append(event["object"])
                    self.statuses.append(event["object"].get("status") or {})
        except Exception as error:  # the connection is shut down by stop()
            self.error = error

    def stop(self) -> None:
        """Shut the socket down (a reader blocked on it returns at once) and wait for the reader."""
        sock = self._connection.sock if self._connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._connection is not None:
            self._connection.close()

    def phases(self) -> list[str]:
        """The phases in order, consecutive repeats folded (an object with no status yet has none)."""
        seen: list[str] = []
        for status in list(self.statuses):
            phase = status.get("phase")
            if phase and (not seen or seen[-1] != phase):
                seen.append(phase)
        return seen

    def first(self, phase: str) -> dict[str, Any]:
        return next(s for s in list(self.statuses) if s.get("phase") == phase)


def gpu_pods(admin: KubeRest) -> list[dict[str, Any]]:
    """Pods anywhere in the cluster that ask for a GPU and still hold or wait for one."""
    found = []
    for pod in admin.list("v1", "Pod"):
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for container in pod["spec"]["containers"]:
            if GPU in ((container.get("resources") or {}).get("limits") or {}):
                found.append(pod)
                break
    return found


async def gpus_idle(admin: KubeRest, *, within: float = 60) -> None:
    """No GPU pod and no service waiting for GPUs anywhere: the GPU queue and capacity are shared
    by the whole cluster, so GPU tests start from (and leave) an idle cluster."""

    def idle() -> bool:
        waiting = [
            s
            for s in admin.list(API, "InferenceService")
            if (s.get("status") or {}).get("phase") == "WaitingForGPU"
        ]
        return not gpu_pods(admin) and not waiting

    await eventually(idle, within=within, what="no GPU pods and no WaitingForGPU services in the cluster")


async def delete_services_and_wait(
    operator: RunningController, namespace: str, *, pods_too: bool = False, within: float = 60
) -> None:
    """Delete every InferenceService of the namespace and wait until the API and the controller's
    cache no longer have them. With `pods_too`, also delete their Deployments (what the garbage
    collector would do, but its first collection of a CRD's dependents can lag by its 30 s
    discovery resync) and wait for the pods to go, so the GPUs they held are free."""
    admin = operator.cluster.admin()
    names = [s["metadata"]["name"] for s in admin.list(API, "InferenceService", namespace)]
    for name in names:
        admin.delete(API, "InferenceService", name, namespace)
    store = operator.controllers.inference_services.services.store
    await eventually(
        lambda: not admin.list(API, "InferenceService", namespace),
        within=within,
        what=f"the services of {namespace} deleted",
    )
    # The controller's cache (read here, on the event loop that updates it) must have seen the deletes.
    await poll(
        lambda: not any((o.get("metadata") or {}).get("namespace") == namespace for o in store.objects()),
        within=within,
        what=f"the controller's cache without the services of {namespace}",
    )
    # A reconcile that read a service before its delete may still be on its way to an apply: let it
    # finish before the namespace goes (an apply into a terminating namespace is a 403).
    await settled(operator.controllers.inference_services.controller, within=within)
    if pods_too:
        for name in names:
            admin.delete("apps/v1", "Deployment", name, namespace)
        await eventually(
            lambda: not admin.list("v1", "Pod", namespace, label_selector="inference.llmkube.dev/service"),
            within=within,
            what=f"the pods of {namespace} gone",
        )


async def poll(check: Callable[[], Any], *, within: float = 30, what: str = "condition") -> Any:
    """Like `eventually`, but runs `check` on the event loop: for checks that read the controller's
    in-memory state, which only the loop may touch."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {within:.0f}s waiting for {what}")
        await asyncio.sleep(0.05)


@pytest.fixture
async def services_deleted_first(operator: RunningController, full_namespace: str) -> AsyncIterator[None]:
    """Delete the test's InferenceServices (and wait for their pods to go) before the namespace is
    deleted. Otherwise the namespace controller may remove a Deployment while its service still
    exists, the controller re-creates it, and the API refuses it (403, cause NamespaceTerminating):
    harmless, but a teardown that converges nothing is quicker and quieter. Use it with `autouse` by importing
    it into a test module: `from e2e_support import services_deleted_first`."""
    yield
    await delete_services_and_wait(operator, full_namespace)
