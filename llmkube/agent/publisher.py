"""The host agent's EndpointSlices: each service's slice written when it must be (a change, or a
heartbeat due: plan.agent.slices decides which), read back as our last write left it, and deleted
when the service is no longer served. Only once the controller lists the Service among its metal
Services (the ConfigMap the admission policy on the agent's writes reads), so the agent never sends
a write the policy would refuse for want of it."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import structlog

from llmkube import __version__
from llmkube.agent import metrics
from llmkube.agent.config import AgentConfig
from llmkube.agent.runner import Runner
from llmkube.api.constants import AGENT_FIELD_MANAGER, ANNOTATION_AGENT_MESSAGE, ANNOTATION_AGENT_REASON
from llmkube.api.inferenceservice import InferenceService
from llmkube.kube.cache import Informer
from llmkube.kube.control import Result
from llmkube.kube.errors import NotFound
from llmkube.kube.resource import ENDPOINT_SLICES
from llmkube.kube.rest import ApiClient
from llmkube.kube.types import Obj, ObjectKey
from llmkube.plan.agent.slices import SliceInputs, heartbeat_due_in, slice_intent, slice_name, write_needed
from llmkube.plan.inferenceservice.metal import AGENT_FAILURES
from llmkube.plan.inferenceservice.metal_services import METAL_SERVICES_CONFIGMAP, metal_service_key
from llmkube.plan.inferenceservice.names import service_name
from llmkube.plan.inferenceservice.objects import controlled_by

log = structlog.get_logger("llmkube.agent")

LABEL_INFERENCE_SERVICE = "llmkube.ai/inference-service"
#: while the controller has not created the service's Service yet (its watch wakes us sooner)
SERVICE_WAIT = 10.0

Report = tuple[str, str]  # (reason, message)
Announce = Callable[[ObjectKey, str, str, str], None]  # an Event on the service


class SlicePublisher:
    def __init__(
        self,
        client: ApiClient,
        config: AgentConfig,
        *,
        slices: Informer,
        services: Informer,
        metal_services: Informer,
        announce: Announce,
    ) -> None:
        self._client = client
        self._config = config
        self._slices, self._services, self._metal_services = slices, services, metal_services
        self._announce = announce
        self.last_heartbeat: dict[ObjectKey, float] = {}
        self._written: dict[ObjectKey, tuple[str, Obj]] = {}
        self._unlisted: set[ObjectKey] = set()  # said once each, until listed

    def forget(self, key: ObjectKey) -> None:
        """It is no longer served: said again if it waits for the list once more."""
        self._unlisted.discard(key)

    async def publish(
        self, key: ObjectKey, isvc: InferenceService, runner: Runner | None, report: Report | None
    ) -> Result:
        """Write the service's slice when it must be (a change, or a heartbeat due); when to look
        again."""
        name = service_name(key.name)
        service = self._services.store.get_object(key.namespace, name)
        if service is None or not controlled_by(service, isvc):
            # Not created yet by the controller, or somebody else's: never point it at this host.
            return Result(requeue_after=SERVICE_WAIT)
        service_uid = (service.get("metadata") or {}).get("uid") or ""
        if not self._listed(key.namespace, name, service_uid):
            # The admission policy would refuse the write: wait for the controller's list (its
            # watch wakes us; the requeue only covers a list that never comes).
            if key not in self._unlisted:
                self._unlisted.add(key)
                log.info(
                    "waiting for the controller to list the Service among its metal Services",
                    service=str(key),
                    configmap=f"{self._config.controller_namespace}/{METAL_SERVICES_CONFIGMAP}",
                )
            return Result(requeue_after=SERVICE_WAIT)
        self._unlisted.discard(key)
        port = runner.port if runner is not None else None
        conditions = runner.endpoint() if runner is not None and port is not None else None
        if report is None and runner is not None and not runner.serving:
            report = runner.report()
        if runner is not None and runner.serving:
            report = None
        inputs = SliceInputs(
            namespace=key.namespace,
            service=name,
            service_uid=service_uid,
            agent=self._config.name,
            version=__version__,
            address=self._config.address,
            port=port,
            conditions=conditions,
            report=report,
        )
        now = datetime.now(UTC)
        desired = slice_intent(inputs, now)
        desired["metadata"]["labels"][LABEL_INFERENCE_SERVICE] = key.name
        stored = self._stored_slice(key, slice_name(name, self._config.name))
        interval = timedelta(seconds=self._config.heartbeat_interval)
        why = write_needed(desired, stored, now, interval)
        if why is not None:
            answer, _ = await self._client.apply(
                ENDPOINT_SLICES, desired, field_manager=AGENT_FIELD_MANAGER, force=True
            )
            based_on = ((stored or {}).get("metadata") or {}).get("resourceVersion") or ""
            self._written[key] = (based_on, answer)
            self.last_heartbeat[key] = time.monotonic()
            metrics.SLICE_WRITES.labels(why.split(":")[0]).inc()
            log.info(
                "endpoint slice written",
                service=str(key),
                why=why,
                port=port,
                ready=bool(conditions and conditions.ready),
                reason=report[0] if report else "",
            )
            if report is not None and _report_of(desired) != _report_of(stored):
                # A new thing to say (on a new slice too): said once as an Event, not at each beat.
                failing = report[0] in AGENT_FAILURES
                self._announce(key, "Warning" if failing else "Normal", report[0], report[1])
            stored = answer
        elif key not in self.last_heartbeat and stored is not None:
            self.last_heartbeat[key] = time.monotonic() - (
                interval.total_seconds() - heartbeat_due_in(stored, now, interval)
            )
        return Result(requeue_after=max(0.5, heartbeat_due_in(stored, now, interval)))

    def _listed(self, namespace: str, name: str, uid: str) -> bool:
        """Whether the controller lists this Service (with this uid) among its metal Services."""
        listing = self._metal_services.store.get_object(
            self._config.controller_namespace, METAL_SERVICES_CONFIGMAP
        )
        data = (listing or {}).get("data") or {}
        return bool(uid) and data.get(metal_service_key(namespace, name)) == uid

    def _stored_slice(self, key: ObjectKey, name: str) -> Obj | None:
        """The slice as the cache shows it, or as our last write left it while the cache shows the
        version from before that write (read your own writes)."""
        cached = self._slices.store.get_object(key.namespace, name)
        written = self._written.get(key)
        if written is None:
            return cached
        based_on, answer = written
        version = ((cached or {}).get("metadata") or {}).get("resourceVersion") or ""
        if version == based_on:
            return answer
        del self._written[key]
        return cached

    async def delete(self, key: ObjectKey) -> None:
        name = slice_name(service_name(key.name), self._config.name)
        self._written.pop(key, None)
        self.last_heartbeat.pop(key, None)
        if self._slices.store.get_object(key.namespace, name) is None:
            return
        with contextlib.suppress(NotFound):
            await self._client.delete(ENDPOINT_SLICES, name, key.namespace)
            metrics.SLICE_WRITES.labels("delete").inc()
            log.info("endpoint slice deleted", service=str(key))


def _report_of(endpoint_slice: Obj | None) -> Report:
    annotations = ((endpoint_slice or {}).get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANNOTATION_AGENT_REASON, ""), annotations.get(ANNOTATION_AGENT_MESSAGE, "")
