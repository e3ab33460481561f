"""One connection to the cluster for one command: the controller's own API client, the
kubeconfig's credentials, and the namespace to work in (flag, else the context's, else default)."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import llmkube
from llmkube.kube.rest import ApiClient, ClientConfig, load_client_config

USER_AGENT = f"llmkube-cli/{llmkube.__version__}"


@dataclass(frozen=True)
class Session:
    client: ApiClient
    config: ClientConfig
    namespace: str


@asynccontextmanager
async def open_session(
    kubeconfig: str | None, context: str | None, namespace: str | None
) -> AsyncIterator[Session]:
    config = await load_client_config(kubeconfig, context)
    client = ApiClient.from_config(config, user_agent=USER_AGENT, max_retries=3)
    try:
        yield Session(client, config, namespace or config.namespace or "default")
    finally:
        await client.close()
