"""Fixtures of the node tier: the controller deployed from `manifests/` (image swapped by the test
overlay) and a pod serving the tiny GGUF over HTTP inside the cluster."""

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing.node import NodeCluster
from llmkube_testing.tiny_service import MODEL_SERVER, model_server, model_url, write_model_files
from node_support import (
    CONTROLLER_NAMESPACE,
    OVERLAY,
    TIMINGS,
    Stopwatch,
    deployment_available,
    eventually_http,
    wait_for,
)

MODELS_NAMESPACE = "tiny-models"


@pytest.fixture(scope="session")
def controller(node_cluster: NodeCluster) -> str:
    """`kubectl apply --server-side -k` of the project's manifests through the test overlay, and the
    controller Deployment Available: its pods run the image in-cluster. Returns its namespace."""
    watch = Stopwatch()
    node_cluster.kubectl_run("apply", "--server-side", "-k", str(OVERLAY))
    admin = node_cluster.admin()
    wait_for(
        lambda: deployment_available(admin, "llmkube-controller", CONTROLLER_NAMESPACE),
        within=240,
        what="the llmkube-controller Deployment Available",
    )
    TIMINGS["kubectl apply -k manifests -> controller Deployment Available (s)"] = watch.seconds()
    return CONTROLLER_NAMESPACE


@dataclass(frozen=True)
class ModelSource:
    cluster_ip: str

    def url(self, file: str | None = None) -> str:
        return model_url(self.cluster_ip, file) if file else model_url(self.cluster_ip)


@pytest.fixture(scope="session")
def model_source(node_cluster: NodeCluster) -> ModelSource:
    """A pod that writes the tiny GGUF and serves it (byte ranges, ETags) behind a Service."""
    admin = node_cluster.admin()
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MODELS_NAMESPACE}})
    for obj in model_server(MODELS_NAMESPACE, write_model_files(node_cluster.workdir / "model-files")):
        admin.apply(obj)
    wait_for(
        lambda: deployment_available(admin, MODEL_SERVER, MODELS_NAMESPACE), within=120, what="model server"
    )
    service: dict[str, Any] = admin.get("v1", "Service", MODEL_SERVER, MODELS_NAMESPACE)
    source = ModelSource(service["spec"]["clusterIP"])
    eventually_http(node_cluster, source.url())  # through kube-proxy's rules, from the node
    return source


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """test_newcomer.py first among the node tests: its Helm release owns the cluster-wide objects
    (PriorityClasses, admission policies) the kustomize install of the others owns too, so it runs
    on a cluster without that install and removes its release before they start."""
    here = Path(__file__).parent
    positions = [i for i, item in enumerate(items) if here in item.path.parents]
    node_items = [items[i] for i in positions]
    # Then the modules that check the controller made no refused request (zero 403s over its pods'
    # life), before the agent and drain modules: namespaces they delete under running services
    # leave the controller writes the API server refuses while those namespaces terminate. The
    # router module after them: its check is the API server's audit of its own namespace, and the
    # namespace it deletes (and waits for) comes after their counts. The s3:// Models' module
    # deletes its namespaces under running services too: last of these.
    first = (
        "test_newcomer.py",
        "test_in_cluster_controller.py",
        "test_inference.py",
        "test_router_node.py",
        "test_models_node.py",
    )
    ordered = sorted(
        node_items, key=lambda item: first.index(item.path.name) if item.path.name in first else len(first)
    )
    for i, item in zip(positions, ordered, strict=True):
        items[i] = item


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if TIMINGS:
        terminalreporter.write_sep("-", "node tier timings")
        for what, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{what}: {seconds}")
