"""Helpers shared by the end-to-end tests (the fixtures live in conftest.py)."""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llmkube.controllers.setup import Controllers
from llmkube.kube.client import ApiClient
from llmkube.manager import Manager
from llmkube.testing.pytest_plugin import ClusterHandle
from llmkube.testing.rest import KubeRest, wait_until

API = "inference.llmkube.dev/v1alpha1"


@dataclass
class RunningController:
    manager: Manager
    controllers: Controllers
    cluster: ClusterHandle
    model_cache: Path

    @property
    def client(self) -> ApiClient:
        return self.manager.client

    def requests_with_code(self, code: str) -> int:
        return sum(n for (_, c), n in self.client.request_counts.items() if c == code)

    def mutating_requests(self) -> int:
        return self.client.mutating_requests()


async def eventually(check: Callable[[], Any], *, within: float = 60, what: str = "condition") -> Any:
    """Poll `check` (a sync function) without blocking the event loop the controller runs on."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: wait_until(check, timeout=within, what=what))


def isvc(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name}, "spec": spec}


def model(name: str, source: str = "https://models.invalid/tiny.gguf", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Model",
        "metadata": {"name": name},
        "spec": {"source": source, **spec},
    }


def status_of(admin: KubeRest, kind: str, name: str, namespace: str) -> dict[str, Any]:
    obj = admin.get_or_none(API, kind, name, namespace)
    return (obj or {}).get("status") or {}
