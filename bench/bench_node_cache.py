"""Memory the Node cache costs per Node: the whole object (as cached before) vs only what is read.

The controllers cache Nodes only for their GPUs (capacity, allocatable) and GPU memory. A real GPU
node's JSON is tens of KiB (container images, conditions, GPU feature-discovery labels,
managedFields); this builds such a
node (modelled on a kubelet-registered GPU node with NVIDIA's feature discovery; sizes printed),
parses it with orjson as the client does, runs it through a transform, keeps it in an informer
store, and measures the retained Python heap per Node with tracemalloc:

- whole:   the informers' default transform (drops managedFields and kubectl's last-applied copy);
- trimmed: the Node informer's transform (identity, status.capacity and status.allocatable, the
  GPU memory label).

Usage: .venv/bin/python bench/bench_node_cache.py [--nodes 500]
Prints one JSON object.
"""

import argparse
import gc
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import orjson

from llmkube.kube.cache import Store
from llmkube.kube.cache.transform import strip_for_cache
from llmkube.kube.types import Obj

try:  # the shared Node informer's own transform
    from llmkube.controllers.resources import NODE_CACHE_TRANSFORM
except ImportError:  # before it existed, Nodes were cached whole
    NODE_CACHE_TRANSFORM = None


CONDITIONS = [
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
]
# NVIDIA GPU feature discovery's labels on an 8-GPU node.
GFD_LABELS = {
    "cuda.driver.major": "550", "cuda.driver.minor": "54", "cuda.driver.rev": "15",
    "cuda.runtime.major": "12", "cuda.runtime.minor": "4", "gfd.timestamp": "1709294400",
    "gpu.compute.major": "8", "gpu.compute.minor": "0", "gpu.count": "8", "gpu.family": "ampere",
    "gpu.machine": "DGX-A100", "gpu.memory": "81920", "gpu.product": "NVIDIA-A100-SXM4-80GB",
    "gpu.replicas": "1", "gpu.sharing-strategy": "none", "mig.capable": "true", "mig.strategy": "single",
    "mps.capable": "false", "gpu.present": "true", "gpu.deploy.container-toolkit": "true",
    "gpu.deploy.device-plugin": "true", "gpu.deploy.driver": "true",
    "gpu.deploy.gpu-feature-discovery": "true", "gpu.deploy.dcgm-exporter": "true",
}  # fmt: skip
CPU_FLAGS = (
    "ADX", "AESNI", "AVX", "AVX2", "AVX512BW", "AVX512CD", "AVX512DQ", "AVX512F", "AVX512VL", "FMA3",
    "SHA", "VAES", "VPCLMULQDQ", "AMXBF16", "AMXINT8", "AMXTILE", "GFNI", "IBPB", "STIBP", "WAITPKG",
)  # fmt: skip
MANAGERS = (("kubelet", "status"), ("kubelet", None), ("nfd-master", None), ("gpu-feature-discovery", None))
STATUS_FIELDS = (
    "addresses",
    "allocatable",
    "capacity",
    "conditions",
    "daemonEndpoints",
    "images",
    "nodeInfo",
)
RESOURCES = {"cpu": "96", "memory": "1176561272Ki", "pods": "110", "nvidia.com/gpu": "8"}
PAGES = {"ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0"}


def gpu_node(index: int) -> Obj:
    name = f"gpu-node-{index:04d}"
    digest = "sha256:" + "0123456789abcdef" * 4
    now = "2026-03-01T12:00:00Z"
    images = []
    for i in range(50):
        repository = f"registry.example.com/team-{i % 7}/image-{i}"
        images.append({"names": [f"{repository}@{digest}", f"{repository}:v1.{i}.0"], "sizeBytes": 10**8 + i})
    conditions = [
        {"type": kind, "status": status, "reason": reason, "message": message}
        | {"lastHeartbeatTime": now, "lastTransitionTime": now}
        for kind, status, reason, message in CONDITIONS
    ]
    features = {f"feature.node.kubernetes.io/cpu-cpuid.{flag}": "true" for flag in CPU_FLAGS}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": "p4d.24xlarge",
        "topology.kubernetes.io/zone": "eu-west-1a",
        "topology.kubernetes.io/region": "eu-west-1",
        **{f"nvidia.com/{key}": value for key, value in GFD_LABELS.items()},
        **features,
    }
    fields = {
        "f:status": {f"f:{field}": {} for field in STATUS_FIELDS},
        "f:metadata": {"f:labels": {f"f:{label}": {} for label in labels}},
    }
    managed = [
        {"manager": manager, "operation": "Update", "apiVersion": "v1", "time": now}
        | {"fieldsType": "FieldsV1", "fieldsV1": fields, **({"subresource": sub} if sub else {})}
        for manager, sub in MANAGERS
    ]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"00000000-0000-4000-8000-{index:012d}",
            "resourceVersion": str(100_000 + index),
            "creationTimestamp": now,
            "labels": labels,
            "annotations": {
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "nfd.node.kubernetes.io/feature-labels": ",".join(sorted(features)),
                "csi.volume.kubernetes.io/nodeid": json.dumps({"ebs.csi.aws.com": f"i-{index:017x}"}),
            },
            "managedFields": managed,
        },
        "spec": {"providerID": f"aws:///eu-west-1a/i-{index:017x}", "podCIDR": f"10.{index % 250}.0.0/24"},
        "status": {
            "capacity": {**RESOURCES, **PAGES},
            "allocatable": {**RESOURCES, "cpu": "95690m", "memory": "1165045752Ki", **PAGES},
            "conditions": conditions,
            "addresses": [{"type": "InternalIP", "address": f"10.0.{index % 250}.{index % 200}"},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "ec2" + "0" * 29, "systemUUID": "ec2" + "0" * 33, "bootID": "0" * 36,
                         "kernelVersion": "6.1.0-1.amzn2023", "osImage": "Amazon Linux 2023",
                         "containerRuntimeVersion": "containerd://1.7.11", "kubeletVersion": "v1.37.2",
                         "kubeProxyVersion": "v1.37.2", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images,
        },
    }  # fmt: skip


def retained_bytes_per_node(count: int, transform: Callable[[Obj], Obj]) -> float:
    raw = [orjson.dumps(gpu_node(index)) for index in range(count)]
    store = Store()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for body in raw:
        store.upsert(transform(orjson.loads(body)))
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert len(store) == count
    return (after - before) / count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=500)
    args = parser.parse_args()
    sample = gpu_node(0)
    result: dict[str, Any] = {
        "benchmark": "node_cache_bytes",
        "nodes": args.nodes,
        "node_json_kib": round(len(orjson.dumps(sample)) / 1024, 1),
        "whole_bytes_per_node": round(retained_bytes_per_node(args.nodes, strip_for_cache())),
    }
    if NODE_CACHE_TRANSFORM is not None:
        result["trimmed_bytes_per_node"] = round(retained_bytes_per_node(args.nodes, NODE_CACHE_TRANSFORM))
        result["trimmed_node"] = NODE_CACHE_TRANSFORM(orjson.loads(orjson.dumps(sample)))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
