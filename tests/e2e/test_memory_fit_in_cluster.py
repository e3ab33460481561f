"""Will it fit? On the full local control plane: a Model copied from a real GGUF file gets the
metadata, the service gets a MemoryFit condition with the figures and an InsufficientMemory Event,
a misfit is not blocked unless the enforce annotation says so, a blocked service starts once its
memory request grows, node GPU memory labels count, and `llmkube deploy` warns before creating."""

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    API,
    MERGE,
    RunningController,
    condition_triple,
    delete_services_and_wait,
    eventually,
    isvc,
    model,
    patch,
    patch_isvc,
    phase_is,
    poll,
    status_of,
)
from llmkube_testing.llama_gguf import Shape, write_llama_gguf
from usercli_support import llmkube

# Their Models come from local files: the test namespaces allow them, as an admin would.
pytestmark = pytest.mark.local_sources

EVENTS = "events.k8s.io/v1"
# Small enough to copy at once, shaped like a model: 4 layers, 256 wide, 8 heads / 2 KV heads.
SHAPE = Shape(embedding=256, layers=4, heads=8, kv_heads=2, feed_forward=768, vocab=1000, type="f16")
ENFORCE = {"inference.llmkube.dev/memory-fit": "enforce"}


@pytest.fixture(scope="module")
def gguf_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("memory-fit") / "shaped-f16.gguf"
    write_llama_gguf(path, SHAPE)
    yield path


@pytest.fixture(autouse=True)
async def services_gone_before_the_namespace(
    operator: RunningController, full_namespace: str
) -> AsyncIterator[None]:
    yield
    await delete_services_and_wait(operator, full_namespace, pods_too=True)


async def ready_model(
    operator: RunningController, namespace: str, source: Path, **spec: Any
) -> dict[str, Any]:
    admin = operator.cluster.admin()
    admin.create(model("shaped", source=f"file://{source}", **spec), namespace=namespace)
    status = await eventually(phase_is(admin, "Model", "shaped", namespace, "Ready"), what="the Model copied")
    assert status["gguf"]["headCountKV"] == 2 and status["gguf"]["vocabSize"] == 1000
    return dict(status)


def fit_of(admin: Any, name: str, namespace: str) -> tuple[str, str, str] | None:
    return condition_triple(status_of(admin, "InferenceService", name, namespace), "MemoryFit")


def insufficient_memory_events(admin: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in admin.list(EVENTS, "Event", namespace)
        if (e.get("regarding") or {}).get("name") == name and e.get("reason") == "InsufficientMemory"
    ]


async def test_a_misfit_is_reported_not_blocked_and_a_fit_says_so(
    operator: RunningController, full_namespace: str, gguf_file: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    await ready_model(operator, ns, gguf_file)
    admin.create(
        isvc("tight", modelRef="shaped", contextSize=4096, resources={"memory": "16Mi"}), namespace=ns
    )
    await eventually(phase_is(admin, "InferenceService", "tight", ns, "Ready"), what="a misfit still starts")
    status, reason, message = await eventually(lambda: fit_of(admin, "tight", ns), what="MemoryFit")
    assert (status, reason) == ("False", "ExceedsMemoryRequest")
    # 4 layers x 4096 cells x (2 KV heads x 32) x (2 + 2) bytes = 4 MiB of cache.
    assert (
        message.startswith("needs ~") and "+ KV 4 +" in message and message.endswith("memory request 16 MiB")
    )
    events = await eventually(lambda: insufficient_memory_events(admin, ns, "tight"), what="the Event")
    assert events[0]["type"] == "Warning" and events[0]["note"] == message

    # A legitimate change (more memory) turns the condition True.
    patch_isvc(admin, "tight", ns, {"resources": {"memory": "1Gi"}})
    await eventually(lambda: (fit_of(admin, "tight", ns) or ("",))[0] == "True", what="MemoryFit True")
    assert fit_of(admin, "tight", ns)[1:2] == ("Fits",)  # type: ignore[index]


async def test_enforce_blocks_a_misfit_and_it_starts_when_the_request_grows(
    operator: RunningController, full_namespace: str, gguf_file: Path
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    await ready_model(operator, ns, gguf_file)
    blocked = isvc("blocked", modelRef="shaped", contextSize=4096, resources={"memory": "16Mi"})
    blocked["metadata"]["annotations"] = ENFORCE
    admin.create(blocked, namespace=ns)
    status = await eventually(phase_is(admin, "InferenceService", "blocked", ns, "Failed"), what="Failed")
    degraded = condition_triple(status, "Degraded")
    assert degraded is not None and degraded[:2] == ("True", "InsufficientMemory")
    assert degraded[2].endswith("(not started: the memory-fit annotation says enforce)")
    assert admin.get_or_none("apps/v1", "Deployment", "blocked", ns) is None

    patch_isvc(admin, "blocked", ns, {"resources": {"memory": "1Gi"}})
    status = await eventually(phase_is(admin, "InferenceService", "blocked", ns, "Ready"), what="it starts")
    assert condition_triple(status, "Degraded")[:2] == ("False", "Recovered")  # type: ignore[index]
    assert admin.get_or_none("apps/v1", "Deployment", "blocked", ns) is not None


async def test_node_gpu_memory_labels_count(
    operator: RunningController, full_namespace: str, gguf_file: Path
) -> None:
    """kwok-gpu-0 says its GPUs have 8 MiB: a one-GPU service of this model cannot fit on it."""
    admin, ns = operator.cluster.admin(), full_namespace
    label = "nvidia.com/gpu.memory"
    nodes = operator.controllers.inference_services.nodes.store
    try:
        for name in ("kwok-gpu-0", "kwok-gpu-1"):
            patch(admin, "v1", "Node", name, None, {"metadata": {"labels": {label: "8"}}}, content_type=MERGE)
        await poll(
            lambda: all(
                (n["metadata"].get("labels") or {}).get(label) == "8"
                for n in nodes.objects()
                if "gpu" in n["metadata"]["name"]
            ),
            what="the controller's node cache has the label",
        )
        await ready_model(operator, ns, gguf_file, hardware={"accelerator": "cuda", "gpu": {"count": 1}})
        admin.create(isvc("gpu", modelRef="shaped", contextSize=4096, skipModelInit=True), namespace=ns)
        status, reason, message = await eventually(lambda: fit_of(admin, "gpu", ns), what="MemoryFit")
        assert (status, reason) == ("False", "ExceedsGPUMemory")
        assert message.endswith("8 MiB per GPU (the largest GPU of the cluster's nodes)")
    finally:
        for name in ("kwok-gpu-0", "kwok-gpu-1"):
            patch(
                admin, "v1", "Node", name, None, {"metadata": {"labels": {label: None}}}, content_type=MERGE
            )


async def test_deploy_warns_before_creating_and_refuses_with_enforce(
    operator: RunningController, full_namespace: str, gguf_file: Path
) -> None:
    kc, ns = operator.cluster.kubeconfig, full_namespace
    source = f"file://{gguf_file}"
    refused = await llmkube(
        kc, "deploy", source, "--name", "strict", "-n", ns, "--memory", "16Mi", "--enforce-memory-fit"
    )
    assert refused.code == 1, refused.text
    assert "Warning: it may not fit (ExceedsMemoryRequest): needs ~" in refused.out
    assert "Not created: the memory-fit annotation says enforce." in refused.out
    assert operator.cluster.admin().get_or_none(API, "InferenceService", "strict", ns) is None

    warned = await llmkube(
        kc, "deploy", source, "--name", "loose", "-n", ns, "--memory", "16Mi", "--timeout", "90"
    )
    assert warned.code == 0, warned.text
    out = warned.out
    assert out.index("Warning: it may not fit") < out.index('InferenceService "loose" applied')
    assert "Creating it anyway (estimates can be wrong; --enforce-memory-fit refuses)." in out

    fits = await llmkube(kc, "deploy", source, "--name", "roomy", "-n", ns, "--memory", "1Gi", "--no-wait")
    assert fits.code == 0 and "Memory fit: needs ~" in fits.out and "memory request 1.0 GiB" in fits.out

    status = await llmkube(kc, "status", "loose", "-n", ns)
    assert "Memory:" in status.out and "may NOT fit: needs ~" in status.out
