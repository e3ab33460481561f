"""The egress policy of the Model controller's fetches: the flags, and what the cluster says about
its own addresses (the rule itself is llmkube.plan.model.egress).

What the controller learns, once at start and without blocking it:

* the API server: the host of the URL the controller talks to (a kubeconfig's server, or
  in-cluster `KUBERNETES_SERVICE_HOST`), resolved, and, for a cluster-wide controller, the
  endpoints of the `default/kubernetes` Service (the API servers behind the Service IP);
* the Service networks: `--service-cidr`, else the cluster's ServiceCIDR objects (1.33+);
* the Pod networks: `--pod-cidr`, else the Nodes' `spec.podCIDRs`, read from the Node cache at
  every check (nodes come and go).

A part the cluster does not tell (an older API server without ServiceCIDRs, a refused read) is
logged once; the rest of the policy holds. Fetches wait for the discovery (at most
`DISCOVERY_WAIT` seconds) before their first connection.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

import structlog

from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.kube.errors import ApiError
from llmkube.kube.resource import ENDPOINT_SLICES, SERVICE_CIDRS
from llmkube.kube.rest import ApiClient, TransportError
from llmkube.kube.types import Obj
from llmkube.plan.model.egress import (
    EgressConfig,
    EgressPolicy,
    Endpoint,
    IPNetwork,
    api_endpoints_of,
    endpoints_at,
    pod_cidrs_of,
    policy_for,
    service_cidrs_of,
)

log = structlog.get_logger("llmkube.controllers.model")

#: The longest a fetch waits for the discovery before it goes ahead with what is known.
DISCOVERY_WAIT = 30.0
_KUBERNETES_SLICES = "kubernetes.io/service-name=kubernetes"


def _resolve(host: str, port: int) -> list[str]:
    try:
        return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})
    except OSError:
        return []


def _url_endpoint(url: str) -> tuple[str, int] | None:
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return None
    return parts.hostname, port


class ClusterAddresses:
    """The cluster's own addresses, as far as the controller can learn them; `policy()` is the
    egress policy of this moment."""

    def __init__(
        self,
        config: EgressConfig,
        client: ApiClient,
        nodes: Callable[[], Iterable[Obj]],
        *,
        cluster_wide: bool,
    ) -> None:
        self.config = config
        self._client = client
        self._nodes = nodes
        self._cluster_wide = cluster_wide
        self.api_servers: frozenset[Endpoint] = frozenset()
        self.service_cidrs: tuple[IPNetwork, ...] = ()
        self.discovered = asyncio.Event()

    def policy(self) -> EgressPolicy:
        return policy_for(
            self.config,
            api_servers=self.api_servers,
            discovered_service_cidrs=self.service_cidrs,
            discovered_pod_cidrs=() if self.config.pod_cidrs else pod_cidrs_of(self._nodes()),
        )

    async def ready(self) -> None:
        """Until the discovery ended (at most DISCOVERY_WAIT seconds)."""
        if not self.discovered.is_set():
            try:
                async with asyncio.timeout(DISCOVERY_WAIT):
                    await self.discovered.wait()
            except TimeoutError:
                log.warning("model sources are fetched before the cluster's addresses are known")

    async def discover(self) -> None:
        try:
            self.api_servers = await self._api_servers()
            if not self.config.service_cidrs:
                self.service_cidrs = await self._service_cidrs()
        finally:
            self.discovered.set()
        log.info(
            "model source egress policy",
            api_servers=sorted(f"{e.address}:{e.port}" for e in self.api_servers),
            service_cidrs=[str(c) for c in self.config.service_cidrs or self.service_cidrs],
            pod_cidrs=[str(c) for c in self.config.pod_cidrs] or "from the Nodes",
            allowed_hosts=len(self.config.allowed_hosts),
        )

    async def _api_servers(self) -> frozenset[Endpoint]:
        endpoints: set[Endpoint] = set()
        where = _url_endpoint(self._client.host)
        if where is not None:
            host, port = where
            endpoints |= endpoints_at(await run_in_daemon_thread(_resolve, host, port), port)
        service_host = os.environ.get("KUBERNETES_SERVICE_HOST")
        service_port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if service_host and service_port.isdigit():
            endpoints |= endpoints_at([service_host], int(service_port))
        if self._cluster_wide:
            try:
                slices = await self._client.list_all(
                    ENDPOINT_SLICES, "default", label_selector=_KUBERNETES_SLICES
                )
                endpoints |= api_endpoints_of(slices)
            except (ApiError, TransportError) as error:
                log.warning("the API server's endpoints are not known", error=str(error))
        return frozenset(endpoints)

    async def _service_cidrs(self) -> tuple[IPNetwork, ...]:
        try:
            return service_cidrs_of(await self._client.list_all(SERVICE_CIDRS))
        except (ApiError, TransportError) as error:
            log.warning("the cluster's Service networks are not known (set --service-cidr)", error=str(error))
            return ()
