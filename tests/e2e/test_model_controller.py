"""The Model controller end to end, with standard condition semantics: local files copied into the
controller's cache and described (size, sha256, GGUF metadata), integrity and missing-file
failures without a hot loop, http(s) sources fingerprinted on a real local server, pvc:// sources
waiting for their claim, and accelerator readiness from the kwok nodes."""

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import gguf
import numpy as np
import pytest
from aiohttp import web
from e2e_support import (
    RunningController,
    StatusWatch,
    condition_triple,
    conditions,
    eventually,
    hf_model,
    model,
    phase_is,
    reconcile_log,
    settled,
    status_of,
    watch_reaches,
    worked_through,
)

from llmkube.controllers.model import gpu_capacity
from llmkube.kube.control import Controller
from llmkube.kube.types import ObjectKey
from llmkube.plan.inferenceservice.memory_fit import GPU_MEMORY_LABELS
from llmkube.plan.model.size import format_size

# Their Models come from local files: the test namespaces allow them, as an admin would.
pytestmark = pytest.mark.local_sources

GGUF_NAME = "Tiny Llama"


def write_gguf(path: Path) -> bytes:
    """A small but genuine GGUF file (header key/values and one tensor)."""
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name(GGUF_NAME)
    writer.add_file_type(15)  # Q4_K_M
    writer.add_context_length(4096)
    writer.add_embedding_length(16)
    writer.add_block_count(2)
    writer.add_head_count(4)
    writer.add_license("MIT License")
    writer.add_tensor("token_embd.weight", np.arange(8 * 16, dtype=np.float32).reshape(8, 16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path.read_bytes()


EXPECTED_GGUF = {
    "architecture": "llama",
    "modelName": GGUF_NAME,
    "quantization": "Q4_K_M",
    "contextLength": 4096,
    "embeddingSize": 16,
    "layerCount": 2,
    "headCount": 4,
    "tensorBytes": 8 * 16 * 4,  # the one float32 tensor (for the memory-fit estimate)
    "tensorCount": 1,
    "fileVersion": 3,
    "license": "mit",
}


def human_size(size: int) -> str:
    """The reference's formatBytes for sizes under 1 MiB: `N B`, else KiB with one decimal."""
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} KiB"


def source_key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]


@pytest.fixture
def gguf_file(tmp_path: Path) -> tuple[Path, bytes]:
    path = tmp_path / "weights" / "tiny-llama.Q4_K_M.gguf"
    path.parent.mkdir()
    return path, write_gguf(path)


async def test_a_local_file_is_copied_into_the_cache_and_described(
    operator: RunningController, full_namespace: str, gguf_file: tuple[Path, bytes]
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    path, data = gguf_file
    sources = {"by-url": f"file://{path}", "by-path": str(path)}
    for name, source in sources.items():
        admin.create(model(name, source=source), namespace=ns)
    for name, source in sources.items():
        status = await eventually(phase_is(admin, "Model", name, ns, "Ready"), what=f"{name} Ready")
        key = source_key(source)
        cached = operator.model_cache / key / "Tiny-Llama.gguf"  # named after the GGUF general.name
        assert {k: status.get(k) for k in ("path", "size", "sha256", "cacheKey", "acceleratorReady")} == {
            "path": str(cached),
            "size": human_size(len(data)),
            "sha256": hashlib.sha256(data).hexdigest(),
            "cacheKey": key,
            "acceleratorReady": True,
        }
        assert status["gguf"] == EXPECTED_GGUF
        assert status["sourceContentLength"] == len(data)
        assert cached.read_bytes() == data
        assert sorted(p.name for p in cached.parent.iterdir()) == ["Tiny-Llama.gguf"]  # no temp files left
        assert condition_triple(status, "Available") == ("True", "ModelReady", "Model downloaded and cached")
        assert condition_triple(status, "Progressing") == (
            "False",
            "Superseded",
            "Model reached Ready from the controller's cache",
        )
        assert condition_triple(status, "SourceDrifted") == (
            "False",
            "InSync",
            "Cached model matches the upstream source",
        )
        assert "Degraded" not in conditions(status)


@contextlib.contextmanager
def reconciled_twice_in_a_row(controller: Controller) -> Iterator[None]:
    """Every reconcile is followed at once by another of the same key: the second one starts before
    the watch can bring the first one's status writes into the cache (test instrumentation around
    the real reconcile function)."""
    inner = controller._reconcile

    async def twice(key: ObjectKey) -> Any:
        result = await inner(key)
        await inner(key)
        return result

    controller._reconcile = twice
    try:
        yield
    finally:
        controller._reconcile = inner


async def test_a_reconcile_before_the_cache_shows_our_writes_writes_nothing_more(
    operator: RunningController, full_namespace: str, gguf_file: tuple[Path, bytes]
) -> None:
    """The copy writes Copying, then Ready/ModelReady. A reconcile that reads the cache before the
    watch delivered those writes must plan from them, not find the file "already in the cache" and
    rewrite the Model as Ready/ModelCached (nor stamp new transition times on the same status)."""
    admin = operator.cluster.admin()
    ns = full_namespace
    path, _ = gguf_file
    watch = StatusWatch(admin, "Model", "fresh", ns).start()
    try:
        with reconciled_twice_in_a_row(operator.controllers.models.controller):
            admin.create(model("fresh", source=str(path)), namespace=ns)
            await eventually(phase_is(admin, "Model", "fresh", ns, "Ready"), what="fresh Ready")
            await settled(operator.controllers.models.controller)
        # The watch has delivered the Model as the API server has it now: every status write is in.
        stored = admin.get("inference.llmkube.dev/v1alpha1", "Model", "fresh", ns)
        await watch_reaches(watch, stored["metadata"]["resourceVersion"])
    finally:
        watch.stop()
    assert watch.phases() == ["Copying", "Ready"]
    assert len(watch.statuses) == 3  # created with no status, then exactly two status writes
    status = status_of(admin, "Model", "fresh", ns)
    assert condition_triple(status, "Available") == ("True", "ModelReady", "Model downloaded and cached")


async def test_a_wrong_sha256_fails_the_integrity_check(
    operator: RunningController, full_namespace: str, gguf_file: tuple[Path, bytes]
) -> None:
    admin = operator.cluster.admin()
    path, data = gguf_file
    wrong = "0" * 64
    admin.create(model("tampered", source=f"file://{path}", sha256=wrong), namespace=full_namespace)
    status = await eventually(phase_is(admin, "Model", "tampered", full_namespace, "Failed"))
    mismatch = f"SHA256 mismatch: expected {wrong}, got {hashlib.sha256(data).hexdigest()}"
    assert condition_triple(status, "Degraded") == ("True", "IntegrityCheckFailed", mismatch)
    assert condition_triple(status, "Progressing") == ("False", "IntegrityCheckFailed", mismatch)
    assert condition_triple(status, "Stalled") == ("True", "IntegrityCheckFailed", mismatch)
    # never Available
    assert set(conditions(status)) == {"Degraded", "Progressing", "Ready", "Reconciling", "Stalled"}
    assert "path" not in status and "sha256" not in status
    # The bytes that failed the check are not left in the cache for a pod to use.
    cache_dir = operator.model_cache / source_key(f"file://{path}")
    assert list(cache_dir.iterdir()) == []


async def test_a_missing_local_file_fails_without_a_hot_loop(
    operator: RunningController, full_namespace: str, tmp_path: Path
) -> None:
    admin = operator.cluster.admin()
    models = operator.controllers.models.controller
    reconciles = reconcile_log(models)
    missing = tmp_path / "nowhere" / "model.gguf"
    admin.create(model("ghost", source=f"file://{missing}"), namespace=full_namespace)
    status = await eventually(phase_is(admin, "Model", "ghost", full_namespace, "Failed"))
    assert condition_triple(status, "Degraded") == (
        "True",
        "CopyFailed",
        f"failed to open local model file {missing}: No such file or directory",
    )
    await settled(models)
    key = ObjectKey(full_namespace, "ghost")
    before_count = reconciles(key)
    before_version = admin.get("inference.llmkube.dev/v1alpha1", "Model", "ghost", full_namespace)[
        "metadata"
    ]["resourceVersion"]
    # Unrecoverable (ENOENT): retried on a fixed 5-minute interval, never through the fast backoff.
    await asyncio.sleep(3)  # an observation window: a hot loop would reconcile many times in it
    await worked_through(models, full_namespace)  # and the controller has worked through it
    assert reconciles(key) == before_count
    assert models.queue.num_requeues(key) == 0
    after = admin.get("inference.llmkube.dev/v1alpha1", "Model", "ghost", full_namespace)
    assert after["metadata"]["resourceVersion"] == before_version


@dataclass
class ModelHost:
    """A real HTTP server on 127.0.0.1 serving one file (ETag, Content-Length, Range), recording what
    it was asked."""

    path: Path
    requests: list[tuple[str, str]] = field(default_factory=list)  # (method, Range header)
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.headers.get("Range", "")))
        return web.FileResponse(self.path)


@pytest.fixture
async def model_host(gguf_file: tuple[Path, bytes]) -> AsyncIterator[ModelHost]:
    host = ModelHost(gguf_file[0])
    app = web.Application()
    app.router.add_route("*", "/models/tiny.gguf", host.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    address, port = runner.addresses[0][:2]
    host.url = f"http://{address}:{port}/models/tiny.gguf"
    try:
        yield host
    finally:
        await runner.cleanup()


async def test_an_http_source_is_resolved_by_the_workload_and_fingerprinted(
    operator: RunningController, full_namespace: str, model_host: ModelHost, gguf_file: tuple[Path, bytes]
) -> None:
    admin = operator.cluster.admin()
    _, data = gguf_file
    admin.create(model("remote", source=model_host.url), namespace=full_namespace)
    status = await eventually(phase_is(admin, "Model", "remote", full_namespace, "Ready"))
    asked = list(model_host.requests)  # what the controller asked (before our own HEAD below)
    async with aiohttp.ClientSession() as session, session.head(model_host.url) as head:
        expected_etag = head.headers["ETag"]  # what the server tells everybody
    assert "path" not in status  # no file of ours: no path, not an empty one
    assert {k: status.get(k) for k in ("size", "cacheKey", "sourceETag", "sourceContentLength")} == {
        "size": format_size(len(data)),  # from the HEAD's length (never "0" for a Ready Model)
        "cacheKey": source_key(model_host.url),
        "sourceETag": expected_etag,
        "sourceContentLength": len(data),
    }
    assert "sha256" not in status  # the controller never sees the bytes
    assert status["lastRevalidated"]
    assert status["gguf"] == EXPECTED_GGUF  # from the header, read with Range requests
    assert condition_triple(status, "Available") == (
        "True",
        "WorkloadResolved",
        "Source is a remote URL; the InferenceService Pod's init container will fetch the model "
        "into the per-namespace model cache PVC at startup",
    )
    assert condition_triple(status, "SourceDrifted") == (
        "False",
        "InSync",
        "Cached model matches the upstream source",
    )
    assert ("HEAD", "") in asked
    gets = [byte_range for method, byte_range in asked if method == "GET"]
    assert gets and all(byte_range.startswith("bytes=") for byte_range in gets)  # never the whole file


def claim(name: str, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


async def test_pvc_sources_wait_for_their_claim(operator: RunningController, full_namespace: str) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    # No provisioner serves this class: the claim stays Pending.
    admin.create(claim("unbound", "llmkube-e2e-no-such-class"), namespace=ns)
    admin.create(model("waiting", source="pvc://unbound/models/x.gguf"), namespace=ns)
    admin.create(model("orphan", source="pvc://missing/models/x.gguf"), namespace=ns)

    waiting = await eventually(phase_is(admin, "Model", "waiting", ns, "Pending"))
    assert condition_triple(waiting, "Progressing") == (
        "True",
        "PVCNotBound",
        'PVC "unbound" is Pending, waiting for it to be Bound',
    )
    assert waiting["cacheKey"] == source_key("pvc://unbound/models/x.gguf")
    assert "path" not in waiting or waiting["path"] in ("", None)

    orphan = await eventually(phase_is(admin, "Model", "orphan", ns, "Failed"))
    assert condition_triple(orphan, "Degraded") == (
        "True",
        "PVCNotFound",
        f'PVC "missing" not found in namespace "{ns}"',
    )


@pytest.mark.parametrize(("accelerator", "ready"), [("cuda", True), ("rocm", False)])
async def test_accelerator_ready_follows_the_nodes_capacity(
    operator: RunningController, full_namespace: str, accelerator: str, ready: bool
) -> None:
    """The kwok GPU nodes advertise nvidia.com/gpu; no node has amd.com/gpu."""
    admin = operator.cluster.admin()
    admin.create(hf_model("m", hardware={"accelerator": accelerator}), namespace=full_namespace)
    status = await eventually(phase_is(admin, "Model", "m", full_namespace, "Ready"))
    assert status["acceleratorReady"] is ready
    assert condition_triple(status, "Available") == (
        "True",
        "RuntimeResolved",
        "Source is runtime-resolved (e.g., HuggingFace repo ID); runtime will fetch at startup",
    )
    assert status_of(admin, "Model", "m", full_namespace)["cacheKey"] == ""


async def test_nodes_are_cached_with_their_capacity_only(operator: RunningController) -> None:
    """The controllers read a Node's capacity, what of it pods may use (allocatable: the GPUs a
    service's pod can get), its GPU memory label (memory fit) and its Pod networks (model sources
    there are refused) and nothing else: that is all their cache keeps (a GPU Node is tens of KiB;
    bench/bench_node_cache.py measures the difference), and the GPU capacity summed from it is the
    real one."""
    admin = operator.cluster.admin()
    nodes = operator.controllers.models.nodes.store
    real = {node["metadata"]["name"]: node for node in admin.list("v1", "Node")}
    cached = {node["metadata"]["name"]: node for node in nodes.objects()}
    assert set(cached) == set(real)
    for name, node in cached.items():
        assert set(node) <= {"apiVersion", "kind", "metadata", "status", "spec"}
        assert node.get("spec", {}) == {k: v for k, v in real[name]["spec"].items() if k == "podCIDRs"}
        assert set(node["metadata"]) <= {"name", "uid", "resourceVersion", "labels"}
        assert set(node["metadata"].get("labels") or {}) <= set(GPU_MEMORY_LABELS.values())
        assert node["metadata"]["uid"] == real[name]["metadata"]["uid"]
        assert node["status"] == {
            "capacity": real[name]["status"]["capacity"],
            "allocatable": real[name]["status"]["allocatable"],
        }
    assert gpu_capacity(nodes.objects()) == gpu_capacity(real.values())
    assert gpu_capacity(nodes.objects())["nvidia.com/gpu"] == 3  # kwok-gpu-0: 2, kwok-gpu-1: 1
