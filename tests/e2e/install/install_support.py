"""Helpers for the install-path tests: a control plane of their own (installs create cluster-wide
objects: CRDs, ClusterRoles, PriorityClasses, which the shared e2e cluster's operator also uses),
server-side apply as the installers do it, and the controller started the way a Deployment runs it."""

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import poll, reconcile_log
from llmkube_testing.cluster import LocalCluster, MissingBinaryError
from llmkube_testing.controller_harness import ControllerHarness, controller_running
from llmkube_testing.rest import KubeRest, RestError, condition_true, wait_until

from llmkube.cli import build_parser
from llmkube.kube.types import ObjectKey
from llmkube.process.config import controllers_config

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "manifests"
CHART = ROOT / "charts" / "llmkube"
APPLY_PATCH = "application/apply-patch+yaml"


@contextlib.contextmanager
def dedicated_cluster() -> Iterator[LocalCluster]:
    if os.environ.get("LLMKUBE_TEST_KUBECONFIG") or os.environ.get("LLMKUBE_TEST_CLUSTER"):
        pytest.skip(
            "install tests create cluster-wide objects: they run on a local control plane of their own"
        )
    try:
        cluster = LocalCluster("full").start()
    except MissingBinaryError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def server_side_apply(
    admin: KubeRest, docs: list[dict[str, Any]], field_manager: str, *, force: bool = False
) -> None:
    """What `kubectl apply --server-side` (manager "kubectl", no force), Argo CD (ServerSideApply=true)
    and Flux's kustomize-controller (both force their changes) do: an apply patch per object."""
    for doc in docs:
        meta = doc["metadata"]
        path = admin.path_for(doc["apiVersion"], doc["kind"], meta.get("namespace"), meta["name"])
        query = {"fieldManager": field_manager, **({"force": "true"} if force else {})}
        admin.request("PATCH", path, doc, content_type=APPLY_PATCH, query=query)
        if doc["kind"] == "CustomResourceDefinition":
            wait_until(
                lambda name=meta["name"]: condition_true(
                    admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name), "Established"
                ),
                timeout=30,
                what=f"CRD {meta['name']} Established",
            )
            admin.forget_discovery()


def delete_all(admin: KubeRest, docs: list[dict[str, Any]]) -> None:
    for doc in reversed(docs):
        with contextlib.suppress(RestError, LookupError):
            admin.delete(
                doc["apiVersion"], doc["kind"], doc["metadata"]["name"], doc["metadata"].get("namespace")
            )


def deployment_available(admin: KubeRest, namespace: str, name: str, replicas: int) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        deployment = admin.get("apps/v1", "Deployment", name, namespace)
        status = deployment.get("status") or {}
        fresh = status.get("observedGeneration") == deployment["metadata"]["generation"]
        ready = status.get("readyReplicas") == replicas and status.get("updatedReplicas") == replicas
        return deployment if fresh and ready and condition_true(deployment, "Available") else None

    found: dict[str, Any] = wait_until(check, timeout=120, what=f"Deployment {namespace}/{name} Available")
    return found


def the_deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    return deployment


@contextlib.asynccontextmanager
async def controller_as_deployed(
    deployment: dict[str, Any], kubeconfig: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[ControllerHarness]:
    """The controller configured from the Deployment's own args and env (through the real CLI parser),
    running in-process as the identity named like its ServiceAccount, leader election off."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    for env in container.get("env", []):
        if "value" in env:
            monkeypatch.setenv(env["name"], env["value"])
    args = build_parser().parse_args(container["args"])
    async with controller_running(
        kubeconfig, controllers_config(args), namespace=args.namespace or None
    ) as running:
        yield running


async def started_and_idle(controller: ControllerHarness) -> None:
    """What a start sends, it has sent: with the classes managed, each was reconciled once (they are
    asked for by a task that runs after the workers start); every controller is idle; every Event
    recorded is written. Only then does "no write" mean the start wrote nothing."""
    classes = controller.controllers.priority_classes
    if classes is not None:
        log = reconcile_log(classes.controller)
        await poll(
            lambda: all(log(ObjectKey("", name)) >= 1 for name in classes.desired),
            what="every PriorityClass reconciled once",
        )
    await controller.idle()
