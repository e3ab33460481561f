"""The node tier is a real node: pods run, Services route, claims bind, and the host's network is
left alone."""

import subprocess
from pathlib import Path

from conftest import ModelSource
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import condition_true
from llmkube_testing.tiny_gguf import write_tiny_gguf
from node_support import http


def test_the_node_is_ready_and_real(node_cluster: NodeCluster) -> None:
    node = node_cluster.admin().get("v1", "Node", node_cluster.node_name)
    assert condition_true(node, "Ready")
    info = node["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.37.2"
    assert info["containerRuntimeVersion"].startswith("containerd://")
    assert {"type": "InternalIP", "address": node_cluster.layout.node_ip} in node["status"]["addresses"]
    assert (
        "annotations" not in node["metadata"] or "kwok.x-k8s.io/node" not in node["metadata"]["annotations"]
    )


def test_a_service_serves_the_tiny_model_with_ranges(
    node_cluster: NodeCluster, model_source: ModelSource, tmp_path: Path
) -> None:
    """A pod from a locally built image, its readiness probe run by the kubelet, its Service's
    ClusterIP routed by kube-proxy: the bytes are the tiny model's, byte for byte."""
    expected = write_tiny_gguf(tmp_path / "tiny.gguf").read_bytes()
    whole = http(node_cluster, model_source.url())
    assert (whole.status, whole.body) == (200, expected)
    part = http(node_cluster, model_source.url(), headers={"Range": "bytes=0-15"})
    assert (part.status, part.body) == (206, expected[:16])
    assert http(node_cluster, model_source.url("missing.gguf")).status == 404


def test_the_host_network_is_untouched(node_cluster: NodeCluster) -> None:
    """Bridge, routes, iptables rules and ip_forward live in the tier's own network namespace."""
    host_links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=True).stdout
    host_routes = subprocess.run(["ip", "route"], capture_output=True, text=True, check=True).stdout
    assert node_cluster.layout.bridge not in host_links
    assert "10.88." not in host_routes and node_cluster.layout.service_cidr not in host_routes
    inside_routes = node_cluster.network.run(["ip", "route"])
    assert node_cluster.layout.service_cidr in inside_routes
    rules = node_cluster.network.run(["iptables-save", "-t", "nat"])
    assert "KUBE-SERVICES" in rules  # kube-proxy's rules: inside only
