"""Fixtures for the kube machinery against the real API server of the `api_cluster` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from llmkube_testing.request_log import RequestLog

from llmkube.kube.rest import ApiClient, load_client_config


@pytest.fixture
def requests() -> RequestLog:
    """What `client` asked of the API server, one log per test."""
    return RequestLog()


@pytest.fixture
async def client(api_cluster: Any, requests: RequestLog) -> AsyncIterator[ApiClient]:
    """Our ApiClient, admin identity (system:masters), one per test, its requests in `requests`."""
    config = await load_client_config(api_cluster.kubeconfig)
    async with ApiClient.from_config(config, observer=requests) as api:
        yield api
