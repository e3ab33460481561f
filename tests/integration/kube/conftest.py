"""Fixtures for the kube machinery against the real API server of the `api_cluster` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from llmkube.kube.rest.client import ApiClient
from llmkube.kube.rest.config import load_client_config


@pytest.fixture
async def client(api_cluster: Any) -> AsyncIterator[ApiClient]:
    """Our ApiClient, admin identity (system:masters), one per test so request counts are per test."""
    config = await load_client_config(api_cluster.kubeconfig)
    async with ApiClient.from_config(config) as api:
        yield api
