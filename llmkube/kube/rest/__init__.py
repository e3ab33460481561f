"""Talking to an API server: `client.ApiClient` (requests, retries, typed errors, watch streams,
an optional observer of every request for tests), `transport` (aiohttp), `config` (kubeconfig or
in-cluster), `kubeconfig`, `exec_credential`, `portforward`. Imports nothing of the cache, queues,
apply, events, leader election or controllers."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.kube.rest.client import (
        APPLY_PATCH,
        DEFAULT_FIELD_MANAGER,
        JSON_PATCH,
        MERGE_PATCH,
        ApiClient,
        RequestObserver,
    )
    from llmkube.kube.rest.config import ClientConfig, ConfigError, in_cluster, load_client_config
    from llmkube.kube.rest.portforward import port_forward
    from llmkube.kube.rest.transport import RequestTimeout, TransportError
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "client": "APPLY_PATCH ApiClient DEFAULT_FIELD_MANAGER JSON_PATCH MERGE_PATCH RequestObserver",
            "config": "ClientConfig ConfigError in_cluster load_client_config",
            "portforward": "port_forward",
            "transport": "RequestTimeout TransportError",
        },
    )
