"""The node tier's decisions that need no node: when it can run, which tier `llmkube run` picks,
where containerd keeps a shim's socket, what a footprint records."""

import hashlib
import json
import tarfile
import tomllib
from pathlib import Path

import pytest
from llmkube_testing import images, node, node_cleanup, node_config, real_run
from llmkube_testing.images import IMAGE_ALIASES, NODE_IMAGES, archive_refs
from llmkube_testing.netns import NetworkLayout


def test_the_tier_needs_root_on_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(node.OFF_SWITCH, raising=False)
    monkeypatch.setattr(node.sys, "platform", "darwin")
    assert "needs Linux" in str(node.node_tier_unavailable())
    monkeypatch.setattr(node.sys, "platform", "linux")
    monkeypatch.setattr(node.os, "geteuid", lambda: 1000)
    assert "needs root" in str(node.node_tier_unavailable())
    monkeypatch.setattr(node.os, "geteuid", lambda: 0)
    assert node.node_tier_unavailable() is None
    monkeypatch.setenv(node.OFF_SWITCH, "off")
    assert "switched off" in str(node.node_tier_unavailable())


def test_run_falls_back_to_kwok_and_says_why(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(real_run, "node_tier_unavailable", lambda: "the node tier needs root")
    assert real_run.choose_run_tier("auto") == (
        "full",
        "the kwok `full` tier (fake nodes, pods never really run), because the node tier needs root",
    )
    with pytest.raises(SystemExit, match="needs root"):
        real_run.choose_run_tier("node")
    assert real_run.choose_run_tier("full")[0] == "full"
    monkeypatch.setattr(real_run, "node_tier_unavailable", lambda: None)
    monkeypatch.setenv("LLMKUBE_IMAGES_DIR", str(tmp_path))
    tier, why = real_run.choose_run_tier("auto", bin_dir=tmp_path)
    assert tier == "full" and "make node-prereqs" in why and "kubelet" in why


def test_shim_sockets_are_named_like_containerd_names_them() -> None:
    # containerd 1.6 shim.SocketAddress: sha256 of "<grpc address>/<namespace>/<id>" under /run/containerd/s.
    address = "/tmp/x/containerd.sock"
    expected = hashlib.sha256(b"/tmp/x/containerd.sock/k8s.io/abc123").hexdigest()
    assert node_cleanup.shim_socket(address, "abc123") == Path("/run/containerd/s") / expected


def test_footprint_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node_cleanup, "REGISTRY", tmp_path)
    footprint = node_cleanup.Footprint(
        run_id="r1",
        owner_pid=1,
        owner_start="0",
        node_dir="/n",
        containerd_root="/n/c/root",
        containerd_state="/n/c/state",
        containerd_address="/n/c/sock",
        cgroup="llmkube-node-r1",
        cni_network="llmkube-r1",
        sysctls={"kernel/panic": "1"},
    )
    footprint.register()
    assert node_cleanup.Footprint.load(tmp_path / "r1.json") == footprint
    assert [f.run_id for f in node_cleanup.registered()] == ["r1"]
    assert not node_cleanup.owner_alive(footprint)  # PID 1 started at another time than "0"


def test_local_images_and_the_init_container_alias(tmp_path: Path) -> None:
    assert {image.archive for image in NODE_IMAGES} == {
        "llmkube-pause.tar",
        "llmkube.tar",
        "llmkube-curl.tar",
        "llama-server.tar",
    }
    assert IMAGE_ALIASES == {"docker.io/curlimages/curl:8.18.0": images.CURL}
    script = (Path(__file__).parents[3] / "hack" / "build-images.sh").read_text()
    for image in NODE_IMAGES:  # the build script and the tier agree on every name
        assert image.ref in script and image.archive.removesuffix(".tar") in script
    index = {"manifests": [{"annotations": {"org.opencontainers.image.ref.name": "localhost/x:1"}}]}
    (tmp_path / "index.json").write_text(json.dumps(index))
    with tarfile.open(tmp_path / "x.tar", "w") as archive:
        archive.add(tmp_path / "index.json", arcname="index.json")
    assert archive_refs(tmp_path / "x.tar") == ["localhost/x:1"]


def test_containerd_config_is_private_and_fits_these_machines(tmp_path: Path) -> None:
    paths = node_config.NodePaths(tmp_path)
    config = tomllib.loads(node_config.containerd_config(paths, sandbox_image="localhost/pause:x"))
    assert config["root"].startswith(str(tmp_path)) and config["state"].startswith(str(tmp_path))
    assert config["grpc"]["address"] == str(paths.containerd_socket)
    cri = config["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["sandbox_image"] == "localhost/pause:x"
    assert cri["restrict_oom_score_adj"] is True  # no CAP_SYS_RESOURCE here
    assert cri["netns_mounts_under_state_dir"] is True  # pod netns cleaned with our mounts
    assert cri["containerd"]["runtimes"]["runc"]["options"]["SystemdCgroup"] is False
    assert cri["cni"]["conf_dir"] == str(paths.cni)


def test_kubelet_and_kube_proxy_settings(tmp_path: Path) -> None:
    paths, layout = node_config.NodePaths(tmp_path), NetworkLayout()
    kubelet = node_config.kubelet_config(
        paths, layout, pki_dir=tmp_path / "pki", cgroup_root="/llmkube-node-x/pods"
    )
    assert kubelet["failCgroupV1"] is False and kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["cgroupRoot"] == "/llmkube-node-x/pods"
    assert kubelet["podLogsDir"] == str(paths.pod_logs)  # not /var/log/pods
    assert kubelet["imageGCHighThresholdPercent"] == 100  # local images cannot be pulled again
    proxy = node_config.kube_proxy_config(layout, kubeconfig=tmp_path / "k", node_name="n")
    assert proxy["iptables"]["masqueradeAll"] is True
    assert proxy["conntrack"]["maxPerCore"] == 0
    network = node_config.cni_network(paths, layout, "llmkube-x")
    assert network["name"] == "llmkube-x"
    assert network["plugins"][0]["ipam"]["dataDir"].startswith(str(tmp_path))
