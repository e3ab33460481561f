"""A Model that names a Hugging Face repository and a quantization (no `spec.files`), reconciled by
the real controllers against a real API server and a Hub stand-in that speaks the Hub's API
(llmkube_testing/hfhub.py, a real HTTP server on loopback, allowed by the egress policy as an
admin would allow a mirror):

* `quantization: Q8_0` -> the Model is Ready with `status.stagedFiles` naming the Q8_0 file, a
  `QuantizationResolved` Event says which file, and the InferenceService's Deployment downloads and
  serves that file (llama.cpp's `--model`);
* `quantization: Q5_K_M`, which the repository lacks -> Failed, `QuantizationNotFound` naming the
  quantizations it has, in the Degraded condition and a Warning Event;
* the Hub was asked for the file list once per repository (the controller keeps it a while).
"""

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from llmkube_testing.controller_harness import controller_running
from llmkube_testing.hfhub import HubState, running_hub
from llmkube_testing.pytest_plugin import ClusterHandle
from llmkube_testing.rest import KubeRest, wait_for_crds, wait_until
from llmkube_testing.tiny_gguf import write_tiny_gguf

from llmkube.api.crds import all_crds
from llmkube.controllers.setup import ControllersConfig
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.model.decision import ModelPlanConfig
from llmkube.plan.model.egress import EgressConfig, parse_allowed_hosts

API = "inference.llmkube.dev/v1alpha1"
REPO = "org/Tiny-Chat-GGUF"


async def eventually(check: Callable[[], Any], *, within: float = 60, what: str = "condition") -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: wait_until(check, timeout=within, what=what))


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HubState]:
    tiny = write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf").read_bytes()
    with running_hub() as state:
        state.add(
            REPO,
            {
                "README.md": b"# tiny\n",
                "tiny-chat-Q4_K_M.gguf": tiny,
                "tiny-chat-Q8_0.gguf": tiny,
                "mmproj-tiny-chat-f16.gguf": b"projector",
            },
        )
        yield state


@pytest.fixture
async def admin(
    api_cluster: ClusterHandle, namespace: str, hub: HubState, tmp_path: Path
) -> AsyncIterator[KubeRest]:
    rest = api_cluster.admin()
    rest.apply_all(all_crds())
    wait_for_crds(rest, [crd["metadata"]["name"] for crd in all_crds()])
    config = ControllersConfig(
        operator=OperatorConfig(hf_endpoint=hub.base),
        model=ModelPlanConfig(cache_path=str(tmp_path / "cache"), hf_endpoint=hub.base),
        # The stand-in is on loopback, which the default policy refuses (as an admin allows a mirror).
        model_egress=EgressConfig(allowed_hosts=parse_allowed_hosts("127.0.0.1")),
        manage_priority_classes=False,
        controller_namespace=namespace,
    )
    async with controller_running(api_cluster.kubeconfig, config, namespace=namespace):
        yield rest


def model(name: str, quantization: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name},
        "spec": {"source": f"hf://{REPO}", "quantization": quantization},
    }


def status_of(admin: KubeRest, name: str, namespace: str) -> dict[str, Any]:
    obj = admin.get_or_none(API, "Model", name, namespace) or {}
    return dict(obj.get("status") or {})


def events_of(admin: KubeRest, name: str, namespace: str) -> list[dict[str, Any]]:
    return [
        e for e in admin.list("v1", "Event", namespace) if (e.get("involvedObject") or {}).get("name") == name
    ]


def degraded(status: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in status.get("conditions") or () if c.get("type") == "Degraded"), None)


async def test_a_quantization_is_served_from_the_hubs_file_list(
    admin: KubeRest, namespace: str, hub: HubState
) -> None:
    name = f"tiny-{uuid.uuid4().hex[:5]}"
    admin.create(model(name, "Q8_0"), namespace=namespace)
    ready = await eventually(
        lambda: (s := status_of(admin, name, namespace)).get("phase") == "Ready" and s,
        what=f"Model {name} Ready",
    )
    assert ready["stagedFiles"] == ["tiny-chat-Q8_0.gguf"]
    assert ready["gguf"]["architecture"] == "llama"  # the chosen file's header, read from the Hub
    resolved = await eventually(
        lambda: [e for e in events_of(admin, name, namespace) if e.get("reason") == "QuantizationResolved"],
        what="the QuantizationResolved Event",
    )
    assert '"tiny-chat-Q8_0.gguf"' in resolved[0]["message"] and resolved[0]["type"] == "Normal"

    # A service of it downloads and serves that file.
    service = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {"modelRef": name, "runtime": "llamacpp", "image": "ghcr.io/ggml-org/llama.cpp:server"},
    }
    admin.create(service, namespace=namespace)
    deployment = await eventually(
        lambda: admin.get_or_none("apps/v1", "Deployment", name, namespace), what=f"Deployment {name}"
    )
    pod = deployment["spec"]["template"]["spec"]
    downloader = json.dumps(pod.get("initContainers") or [])
    assert f"{REPO}/resolve/main/tiny-chat-Q8_0.gguf" in downloader
    assert "Q4_K_M" not in downloader
    args = pod["containers"][0].get("args") or []
    assert args[args.index("--model") + 1].endswith("tiny-chat-Q8_0.gguf")
    listings = [r for r in hub.requests if r.path == f"/api/models/{REPO}/revision/main"]
    assert len(listings) == 1


async def test_a_quantization_the_repository_lacks_says_which_it_has(admin: KubeRest, namespace: str) -> None:
    name = f"absent-{uuid.uuid4().hex[:5]}"
    admin.create(model(name, "Q5_K_M"), namespace=namespace)
    failed = await eventually(
        lambda: (s := status_of(admin, name, namespace)).get("phase") == "Failed" and s,
        what=f"Model {name} Failed",
    )
    condition = degraded(failed)
    assert condition is not None and condition["status"] == "True"
    assert condition["reason"] == "QuantizationNotFound"
    assert '"Q5_K_M"' in condition["message"] and "Q4_K_M, Q8_0" in condition["message"]
    warning = await eventually(
        lambda: [e for e in events_of(admin, name, namespace) if e.get("reason") == "QuantizationNotFound"],
        what="the QuantizationNotFound Event",
    )
    assert warning[0]["type"] == "Warning" and "Q4_K_M, Q8_0" in warning[0]["message"]
