"""The full tier behaves like a cluster: pods run on kwok nodes, the scheduler reports GPU
shortage, and the garbage collector deletes dependents."""

from typing import Any

from llmkube_testing.pytest_plugin import ClusterHandle
from llmkube_testing.rest import wait_until


def deployment(name: str, namespace: str, gpus: int = 0, tolerate_gpu: bool = False) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.invalid/fake:1"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    pod_spec: dict[str, Any] = {"containers": [container]}
    if tolerate_gpu:
        pod_spec["tolerations"] = [
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec},
        },
    }


def test_deployment_pods_become_ready_on_kwok_nodes(full_cluster: ClusterHandle, full_namespace: str) -> None:
    admin = full_cluster.admin()
    admin.create(deployment("web", full_namespace, gpus=1, tolerate_gpu=True))

    def ready() -> int:
        status = admin.get("apps/v1", "Deployment", "web", full_namespace).get("status", {})
        return int(status.get("readyReplicas", 0))

    assert wait_until(ready, timeout=60, what="Deployment web ready") == 1
    (pod,) = admin.list("v1", "Pod", full_namespace, label_selector="app=web")
    assert pod["spec"]["nodeName"] in {"kwok-gpu-0", "kwok-gpu-1"}
    assert pod["status"]["phase"] == "Running"


def test_pod_asking_for_too_many_gpus_stays_pending_with_insufficient_gpu(
    full_cluster: ClusterHandle, full_namespace: str
) -> None:
    admin = full_cluster.admin()
    admin.create(deployment("greedy", full_namespace, gpus=8, tolerate_gpu=True))

    def unschedulable() -> dict[str, Any] | None:
        pods = admin.list("v1", "Pod", full_namespace, label_selector="app=greedy")
        for pod in pods:
            for condition in pod.get("status", {}).get("conditions", []):
                if condition["type"] == "PodScheduled" and condition["status"] == "False":
                    return pod
        return None

    pod = wait_until(unschedulable, timeout=60, what="greedy pod unschedulable")
    condition = next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")
    assert pod["status"]["phase"] == "Pending"
    assert condition["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in condition["message"]


def test_deleting_an_owner_garbage_collects_its_dependents(
    full_cluster: ClusterHandle, full_namespace: str
) -> None:
    admin = full_cluster.admin()
    owner = admin.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner", "namespace": full_namespace}}
    )
    admin.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": "dependent",
                "namespace": full_namespace,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": "owner",
                        "uid": owner["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": False,
                    }
                ],
            },
        }
    )
    admin.delete("v1", "ConfigMap", "owner", full_namespace)
    gone = wait_until(
        lambda: admin.get_or_none("v1", "ConfigMap", "dependent", full_namespace) is None,
        timeout=60,
        what="garbage collection of the dependent",
    )
    assert gone is True
