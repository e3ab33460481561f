"""Helpers of the node-tier tests: HTTP from inside the node's network, metrics, pods."""

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing.node import NodeCluster
from llmkube_testing.pytest_plugin import fresh_namespace
from llmkube_testing.rest import KubeRest, condition_true, wait_until
from prometheus_client.parser import text_string_to_metric_families

API = "inference.llmkube.dev/v1alpha1"
OVERLAY = Path(__file__).parent / "overlay"
CONTROLLER_NAMESPACE = "llmkube-system"
CONTROLLER_SELECTOR = "app.kubernetes.io/name=llmkube,app.kubernetes.io/component=controller"


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")

    def json(self) -> Any:
        return json.loads(self.body)


def http(
    node: NodeCluster,
    url: str,
    body: Any = None,
    *,
    headers: dict[str, str] | None = None,
    timeout: float = 30,
) -> Reply:
    """A request from inside the node's network (pod and Service addresses live only there)."""

    def send() -> Reply:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(
            url, data=data, method="POST" if data else "GET", headers=headers or {}
        )
        if data:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return Reply(response.status, response.read())
        except urllib.error.HTTPError as error:
            return Reply(error.code, error.read())

    return node.network.run_inside(send, timeout=timeout + 5)


def eventually_http(
    node: NodeCluster,
    url: str,
    body: Any = None,
    *,
    within: float = 60,
    headers: dict[str, str] | None = None,
) -> Reply:
    """The first 200 (a Service's rules and endpoints settle a moment after readiness)."""

    def ok() -> Reply | None:
        try:
            reply = http(node, url, body, headers=headers, timeout=10)
        except OSError:
            return None
        return reply if reply.status == 200 else None

    reply: Reply = wait_until(ok, timeout=within, interval=0.5, what=f"200 from {url}")
    return reply


def metric_samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def controller_pods(admin: KubeRest) -> list[dict[str, Any]]:
    """The controller's pods that run (have an address) and are not being deleted."""
    pods = admin.list("v1", "Pod", CONTROLLER_NAMESPACE, label_selector=CONTROLLER_SELECTOR)
    return [
        p for p in pods if not p["metadata"].get("deletionTimestamp") and (p.get("status") or {}).get("podIP")
    ]


def controller_metrics(node: NodeCluster, pod: dict[str, Any]) -> str:
    return http(node, f"http://{pod['status']['podIP']}:8080/metrics").text


def wait_for(predicate: Callable[[], Any], *, within: float, what: str, interval: float = 0.5) -> Any:
    return wait_until(predicate, timeout=within, interval=interval, what=what)


def ready_pods(admin: KubeRest, namespace: str, selector: str) -> list[dict[str, Any]]:
    pods = admin.list("v1", "Pod", namespace, label_selector=selector)
    return [p for p in pods if condition_true(p, "Ready") and not p["metadata"].get("deletionTimestamp")]


def deployment_available(admin: KubeRest, name: str, namespace: str) -> bool:
    deployment = admin.get_or_none("apps/v1", "Deployment", name, namespace)
    if deployment is None:
        return False
    status = deployment.get("status") or {}
    return (
        condition_true(deployment, "Available")
        and status.get("updatedReplicas") == deployment["spec"]["replicas"]
        and status.get("readyReplicas") == deployment["spec"]["replicas"]
        and status.get("observedGeneration") == deployment["metadata"]["generation"]
    )


class Stopwatch:
    def __init__(self) -> None:
        self.t0 = time.monotonic()

    def seconds(self) -> float:
        return round(time.monotonic() - self.t0, 1)


# Figures worth reading after a run (tier start, apply -> first completion, leader hand-over...):
# printed at the end of the session by conftest.py.
TIMINGS: dict[str, float] = {}


def namespace_gone_after(
    node: NodeCluster, request: pytest.FixtureRequest, *, within: float
) -> Iterator[str]:
    """fresh_namespace, waiting after the test until the namespace is gone (one still terminating
    makes the controller's writes there refused, which the zero-403 checks of other modules count)."""
    names: list[str] = []
    try:
        for name in fresh_namespace(node, request):
            names.append(name)
            yield name
    finally:
        admin = node.admin()
        for name in names:

            def gone(namespace: str = name) -> bool:
                return admin.get_or_none("v1", "Namespace", namespace) is None

            wait_for(gone, within=within, what=f"namespace {name} deleted")
