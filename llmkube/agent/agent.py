"""The host agent: serves metal InferenceServices from this host, outside the kubelet.

It watches the InferenceServices in its scope (`--namespace`, `--service-selector`), their Models,
the Services the controller creates for them and its own EndpointSlices, and reconciles one
service at a time (one worker: admission and eviction decide over all of them at once). What it
does about a service is one pure step, plan.agent.service.plan_service, from what it observed (the
facts below) to a value (servers to stop, start, roll or promote; services to evict; Events; what
its slice says; when to look again); this module observes and performs. For each:

1. what to do about it (plan.agent.assignment): serve, stop, remove, keep, or say it cannot;
2. its model file (fetch.py): fetched into the cache or opened where it is, in the background;
3. what it needs (memory_fit's estimate from the file's header) and whether that fits, evicting
   services of lower priority when it must (plan.agent.admission);
4. a server (runner.py) with the controller's own command line on a port of its choosing, rolled
   in place when the spec changes (plan.agent.rollout);
5. its EndpointSlice (plan.agent.slices): the endpoint, the heartbeat, what it has to say; only
   once the controller lists the Service among its metal Services (the ConfigMap the admission
   policy on the agent's writes reads: plan/inferenceservice/metal_services.py), so the agent
   never sends a write the policy would refuse for want of it.

The servers outlive the agent: their records are in the state file, and a restarted agent adopts
them (or stops them when they are no longer wanted), so no model is ever loaded twice by a
restart. A converged agent writes nothing but its heartbeats, and a restart writes nothing until
they are due. Under memory pressure a watchdog evicts one service at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import aiohttp
import structlog
from pydantic import ValidationError

from llmkube.agent import host, metrics
from llmkube.agent.config import AgentConfig
from llmkube.agent.fetch import ModelStore
from llmkube.agent.processes import adopt
from llmkube.agent.publisher import LABEL_INFERENCE_SERVICE, SlicePublisher
from llmkube.agent.runner import Runner
from llmkube.agent.server_keys import ServerKeys
from llmkube.agent.state import ServerRecord, load, save
from llmkube.api.constants import (
    LABEL_AGENT_NAME,
    LABEL_METAL_MANAGED_BY,
    METAL_AGENT_VALUE,
)
from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import GGUFMetadata, Model
from llmkube.kinds import INFERENCE_SERVICES, MANAGED_SELECTOR, MODELS
from llmkube.kube.blocking import run_in_daemon_thread
from llmkube.kube.cache import Change, by_field
from llmkube.kube.control import Result, Watch, enqueue_mapped, enqueue_object, enqueue_owner
from llmkube.kube.errors import ApiError
from llmkube.kube.queue import ItemExponentialRateLimiter
from llmkube.kube.resource import CONFIG_MAPS, ENDPOINT_SLICES, NODES, SERVICES
from llmkube.kube.rest import TransportError
from llmkube.kube.types import Obj, ObjectKey
from llmkube.manager import Manager
from llmkube.plan.agent.admission import (
    Demand,
    Resident,
    check_pressure,
    waiting_order,
)
from llmkube.plan.agent.artifact import ModelFile
from llmkube.plan.agent.assignment import Assignment, Verdict, assignment
from llmkube.plan.agent.launch import Host, with_port
from llmkube.plan.agent.memory import Pressure, need_of
from llmkube.plan.agent.service import (
    Announce,
    Evict,
    Memory,
    Promote,
    Rank,
    Rebind,
    Remembered,
    Role,
    Server,
    ServiceFacts,
    ServicePlan,
    Serving,
    SetAside,
    Start,
    Stop,
    plan_service,
)
from llmkube.plan.inferenceservice.agent_verdict import verdict_of
from llmkube.plan.inferenceservice.metal import (
    EVICTED,
)
from llmkube.plan.inferenceservice.metal_services import METAL_SERVICES_CONFIGMAP
from llmkube.sources import ClusterAddresses, GuardedResolver, HeaderError, read_gguf_metadata

log = structlog.get_logger("llmkube.agent")
T = TypeVar("T", InferenceService, Model)

CONTROLLER = "metal-agent"
BY_MODEL = "model"


@dataclass
class Served:
    """One InferenceService this agent serves: its servers and what it has to say."""

    key: ObjectKey
    uid: str = ""
    current: Runner | None = None  # the server its slice points at
    next: Runner | None = None  # a server of a new spec, starting beside it (a roll)
    draining: list[Runner] = field(default_factory=list)  # replaced servers, finishing
    #: why it was stopped to make room (kept until it runs again)
    evicted: str = ""
    evicted_under_pressure: bool = False
    #: a new spec that could not roll out (its server kept failing, or did not fit): not retried
    refused_identity: str = ""

    def runners(self) -> list[Runner]:
        return [r for r in (self.current, self.next, *self.draining) if r is not None]


class Agent:
    def __init__(self, manager: Manager, config: AgentConfig) -> None:
        self.manager = manager
        self.config = config
        self.host = Host(address=config.address, metal=config.metal)
        self.served: dict[ObjectKey, Served] = {}
        self._headers: dict[str, GGUFMetadata | None] = {}
        self._pressure = Pressure.NORMAL
        self._nodes: list[Obj] = []
        self._probe_session: aiohttp.ClientSession | None = None
        self._fetch_session: aiohttp.ClientSession | None = None
        self.store: ModelStore | None = None
        self.keys: ServerKeys | None = None
        self.addresses: ClusterAddresses | None = None
        # Set when the agent ends: from then on no reconcile starts a server or writes a slice (the
        # workers stop only after close() began, and a reconcile then would start a server the
        # stopping agent leaves behind, or write back the slice it deleted).
        self._closing = False
        self._reconciling = asyncio.Lock()

        self.services = manager.informer(INFERENCE_SERVICES, label_selector=config.service_selector or None)
        self.services.add_index(BY_MODEL, by_field("spec", "modelRef"))
        self.models = manager.informer(MODELS)
        slices = f"{LABEL_METAL_MANAGED_BY}={METAL_AGENT_VALUE},{LABEL_AGENT_NAME}={config.name}"
        self.slices = manager.informer(ENDPOINT_SLICES, label_selector=slices)
        self.k8s_services = manager.informer(SERVICES, label_selector=MANAGED_SELECTOR)
        # The controller's list of metal Services: the one object of its namespace the agent reads.
        listed = f"metadata.name={METAL_SERVICES_CONFIGMAP}"
        self.metal_services = manager.informer(
            CONFIG_MAPS, namespace=config.controller_namespace, field_selector=listed
        )
        self.publisher = SlicePublisher(
            manager.client,
            config,
            slices=self.slices,
            services=self.k8s_services,
            metal_services=self.metal_services,
            announce=self._announce_key,
        )
        self.controller = manager.add_controller(
            CONTROLLER,
            self.reconcile,
            workers=1,
            # Retries never wait longer than a heartbeat: an API server that comes back gets the
            # heartbeats (and whatever changed meanwhile) at once.
            rate_limiter=ItemExponentialRateLimiter(0.5, config.heartbeat_interval),
            watches=[
                Watch(INFERENCE_SERVICES, enqueue_object, label_selector=config.service_selector or None),
                Watch(MODELS, enqueue_mapped(self._services_of_model)),
                Watch(ENDPOINT_SLICES, enqueue_mapped(self._service_of_slice), label_selector=slices),
                Watch(SERVICES, enqueue_owner(INFERENCE_SERVICES), label_selector=MANAGED_SELECTOR),
                Watch(
                    CONFIG_MAPS,
                    self._waiting_for_the_list,
                    namespace=config.controller_namespace,
                    field_selector=listed,
                ),
            ],
        )
        manager.add_task("agent:pressure", self._watch_pressure)
        manager.add_task("agent:discover", self._discover)
        self._unregister = metrics.register(self._snapshot)

    # -- start and stop -----------------------------------------------------------------------------
    async def open(self) -> None:
        """Sessions, the model store, and the servers a previous agent left running."""
        self._probe_session = aiohttp.ClientSession()
        self.addresses = ClusterAddresses(
            self.config.egress,
            self.manager.client,
            lambda: self._nodes,
            cluster_wide=not self.config.namespace,
        )
        addresses = self.addresses
        connector = aiohttp.TCPConnector(resolver=GuardedResolver(addresses.policy))
        self._fetch_session = aiohttp.ClientSession(connector=connector)
        self.config.cache_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.config.state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.store = ModelStore(
            self.config.cache_dir,
            self.config.local_roots,
            self._fetch_session,
            addresses.policy,
            self._model_progress,
            limits=self.config.downloads,
            hf_endpoint=self.config.hf_endpoint,
        )
        self.keys = ServerKeys(
            self.manager.client, self.config.controller_namespace, self.config.state_dir / "keys"
        )
        self._adopt()

    async def close(self) -> None:
        """Leave the servers running (the next agent adopts them), unless told to stop them."""
        self._closing = True
        async with self._reconciling:  # the reconcile in flight, if any, finishes first
            await self._close()

    async def _close(self) -> None:
        for served in self.served.values():
            for runner in served.runners():
                if self.config.stop_on_exit:
                    runner.stop("the agent stops (--stop-on-exit)")
                else:
                    await runner.abandon()
        if self.config.stop_on_exit:
            runners = [r for s in self.served.values() for r in s.runners()]
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.config.supervision.stop_grace + 2):
                    await asyncio.gather(*(r.done.wait() for r in runners))
            for key in list(self.served):
                with contextlib.suppress(ApiError, TransportError):
                    await self.publisher.delete(key)
            self._save_state()
        if self.store is not None:
            await self.store.close()
        for session in (self._probe_session, self._fetch_session):
            if session is not None:
                await session.close()
        self._unregister()

    def _adopt(self) -> None:
        for record in load(self.config.state_dir):
            process = adopt(
                record.pid, record.command, record.port, Path(record.log_path), record.fingerprint
            )
            if process is None:
                log.info("a server of the previous agent is gone", service=record.key, pid=record.pid)
                continue
            key = ObjectKey.parse(record.key)
            served = self.served.setdefault(key, Served(key, uid=record.uid))
            runner = self._runner(
                key,
                functools.partial(with_port, record.command),
                record.identity,
                record.need,
                0,
                False,
                (),
            )
            runner.source_identity = record.source_identity
            runner.start(adopted=process)
            if record.role == "current" and served.current is None:
                served.current = runner
            elif record.role == "next" and served.next is None:
                served.next = runner
            else:  # two servers in one role: keep one
                runner.stop("a second server of the same service")
                served.draining.append(runner)
            log.info("server adopted", service=record.key, pid=record.pid, port=record.port, role=record.role)
            self.controller.enqueue(key)

    async def _discover(self) -> None:
        """Once the caches synced: the cluster's addresses for the egress rules (its Nodes' Pod
        networks read once: the agent does not watch Nodes), and every adopted server reconciled."""
        assert self.addresses is not None
        if not self.config.egress.pod_cidrs:
            try:
                self._nodes = await self.manager.client.list_all(NODES)
            except (ApiError, TransportError) as error:
                log.warning("the cluster's Pod networks are not known (set --pod-cidr)", error=str(error))
        await self.addresses.discover()
        for key in self.served:
            self.controller.enqueue(key)
        await asyncio.Event().wait()

    # -- events -> keys -------------------------------------------------------------------------------
    def _services_of_model(self, model: Obj) -> list[ObjectKey]:
        meta = model.get("metadata") or {}
        keys = self.services.store.keys_by_index(BY_MODEL, f"{meta.get('namespace')}/{meta.get('name')}")
        return [ObjectKey.parse(k) for k in keys]

    def _service_of_slice(self, endpoint_slice: Obj) -> list[ObjectKey]:
        meta = endpoint_slice.get("metadata") or {}
        name = (meta.get("labels") or {}).get(LABEL_INFERENCE_SERVICE)
        return [ObjectKey(meta.get("namespace") or "", name)] if name else []

    def _waiting_for_the_list(self, change: Change) -> list[ObjectKey]:
        """The list changed: the services that wait for it (or may have left it) look again."""
        return list(self.served)

    def _model_progress(self, source: str) -> None:
        for raw in self.services.store.objects():
            meta = raw.get("metadata") or {}
            model = self.models.store.get_object(
                meta.get("namespace"), (raw.get("spec") or {}).get("modelRef", "")
            )
            if model is not None and (model.get("spec") or {}).get("source") == source:
                self.controller.enqueue(ObjectKey.of(raw))

    # -- reconcile --------------------------------------------------------------------------------------
    async def reconcile(self, key: ObjectKey) -> Result | None:
        async with self._reconciling:
            if self._closing:
                return None
            result = await self._reconcile(key)
            self._close_unused_files()
            return result

    def _close_unused_files(self) -> None:
        """A local model file stays open (its descriptor is what a server is given, so the file
        cannot be swapped under it) only while a served service's Model names it: the file of a
        Model edited or deleted is closed, so a deleted file's space is freed. Servers already
        started hold their own inherited copy."""
        if self.store is None or not self.store.holds_open_files():
            return
        in_use = set()
        for key in self.served:
            raw = self.services.store.get_object(key.namespace, key.name)
            if (model := self._model(_parse(InferenceService, raw))) is not None:
                in_use.add(ModelStore.key_of(model))
        self.store.forget_unused(in_use)

    async def _reconcile(self, key: ObjectKey) -> Result | None:
        raw = self.services.store.get_object(key.namespace, key.name)
        isvc = _parse(InferenceService, raw)
        model = self._model(isvc)
        decision = assignment(
            isvc, model, self.host, unrestricted_namespaces=self.config.unrestricted_server_flags
        )
        served = self.served.get(key)
        holding = self._live_runners()
        serving = None
        if decision.verdict is Verdict.SERVE and isvc is not None and model is not None:
            serving = await self._serving(isvc, model)
        plan = plan_service(self._facts(key, isvc, model, decision, served, serving))
        if plan.remembered is None:  # not served: its servers stop, its slice goes
            if served is not None:
                self._perform(served, plan)
                if isvc is not None and served.uid and served.uid != isvc.metadata.uid:
                    served.uid = isvc.metadata.uid or ""  # made again under the name
                self._tidy(served)
                if not served.runners():
                    del self.served[key]
            self.publisher.forget(key)
            await self.publisher.delete(key)
            self._save_state()
            self._freed(holding)
            return None
        assert isvc is not None and raw is not None
        if served is None:
            served = self.served[key] = Served(key)
        self._perform(served, plan)
        remembered = plan.remembered
        served.uid, served.evicted = remembered.uid, remembered.evicted
        served.evicted_under_pressure = remembered.evicted_under_pressure
        served.refused_identity = remembered.refused_identity
        self._tidy(served)
        self._save_state()
        self._freed(holding)
        result = await self.publisher.publish(key, isvc, served.current, plan.report)
        if plan.retry_at is not None:
            wait = max(0.5, plan.retry_at - time.monotonic())
            result = Result(requeue_after=min(wait, result.requeue_after or wait))
        return result

    async def _serving(self, isvc: InferenceService, model: Model) -> Serving:
        """What serving it takes, looked at in order: its model file, its memory need, its key."""
        assert self.store is not None and self.keys is not None
        artifact = self.store.get(model)
        if not isinstance(artifact, ModelFile):
            return Serving(artifact)
        need = await self._need(isvc, model, artifact)
        if need is None:
            return Serving(artifact)
        return Serving(artifact, need, await self.keys.key_file(isvc))

    def _facts(
        self,
        key: ObjectKey,
        isvc: InferenceService | None,
        model: Model | None,
        decision: Assignment,
        served: Served | None,
        serving: Serving | None,
    ) -> ServiceFacts:
        held = sum(r.need for s in self.served.values() for r in s.runners() if not r.done.is_set())
        memory = Memory(
            self.config.budget,
            tuple(self._residents(exclude=served)),
            held,
            self._pressure is not Pressure.NORMAL,
        )
        remembered = None
        if served is not None:
            remembered = Remembered(
                served.uid, served.evicted, served.evicted_under_pressure, served.refused_identity
            )
        return ServiceFacts(
            key=str(key),
            agent=self.config.name,
            binary=self.config.llama_server,
            host=self.host,
            isvc=isvc,
            model=model,
            assignment=decision,
            memory=memory,
            now=time.monotonic(),
            remembered=remembered,
            current=_server(served.current) if served is not None else None,
            next=_server(served.next) if served is not None else None,
            draining=bool(served.draining) if served is not None else False,
            serving=serving,
            crash_loop_after=self.config.supervision.crash_loop_after,
        )

    def _perform(self, served: Served, plan: ServicePlan) -> None:
        """Do what the plan says, in its order."""
        for action in plan.actions:
            match action:
                case Stop(role=role, reason=reason):
                    runner = self._take(served, role)
                    runner.stop(reason)
                    served.draining.append(runner)
                case SetAside(role=role):
                    served.draining.append(self._take(served, role))
                case Start(role=role, launch=launch):
                    runner = self._runner(
                        served.key,
                        launch.command,
                        launch.identity(),
                        action.need,
                        action.priority,
                        action.protected,
                        launch.pass_fds,
                    )
                    runner.source_identity = launch.artifact.identity
                    setattr(served, role, runner)
                    runner.start()
                    if role == "next":
                        log.info("rolling in place", service=str(served.key))
                case Promote():
                    old, new = served.current, served.next
                    assert old is not None and new is not None
                    served.current, served.next = new, None
                    old.retire(time.monotonic())
                    served.draining.append(old)
                case Rank(priority=priority, protected=protected):
                    assert served.current is not None
                    served.current.priority, served.current.protected = priority, protected
                case Rebind(launch=launch):
                    assert served.current is not None
                    served.current.rebind(launch.command, launch.pass_fds)
                case Evict(key=victim, message=message):
                    self._evict(ObjectKey.parse(victim), message, for_whom=served.key)
                case Announce(type=type_, reason=reason, message=message):
                    self._announce(served, type_, reason, message)

    @staticmethod
    def _take(served: Served, role: Role) -> Runner:
        runner: Runner | None = getattr(served, role)
        assert runner is not None
        setattr(served, role, None)
        return runner

    async def _need(self, isvc: InferenceService, model: Model, artifact: ModelFile) -> int | None:
        gguf = None
        if artifact.path:
            if artifact.identity not in self._headers:
                try:
                    self._headers[artifact.identity] = await run_in_daemon_thread(
                        read_gguf_metadata, artifact.path
                    )
                except (HeaderError, OSError) as error:
                    log.warning(
                        "the model file's GGUF header cannot be read", path=artifact.path, error=str(error)
                    )
                    self._headers[artifact.identity] = None
            gguf = self._headers[artifact.identity]
        need = need_of(
            model,
            isvc.spec,
            gguf,
            file_size=artifact.size,
            gpu_count=1 if self.host.metal else 0,
            unified_memory=self.host.metal or not (model.spec.hardware and model.spec.hardware.gpu),
            total=self.config.total_memory,
        )
        return need.bytes

    def _residents(self, *, exclude: Served | None = None) -> list[Resident]:
        found = []
        for served in self.served.values():
            if served is exclude:
                continue
            for runner in served.runners():
                if runner.done.is_set():
                    continue
                found.append(
                    Resident(
                        f"{served.key}", runner.need, runner.priority, runner.protected, runner.started_at
                    )
                )
        return found

    def _evict(self, key: ObjectKey, message: str, *, for_whom: ObjectKey) -> None:
        served = self.served.get(key)
        if served is None:
            return
        served.evicted, served.evicted_under_pressure = message, False
        self._stop_all(served, message)
        metrics.EVICTIONS.labels("priority").inc()
        self._announce(served, "Warning", EVICTED, message)
        log.warning("service evicted", service=str(key), for_service=str(for_whom))
        self.controller.enqueue(key)

    def _stop_all(self, served: Served, reason: str) -> None:
        for runner in (served.current, served.next):
            if runner is not None:
                runner.stop(reason)
                served.draining.append(runner)
        served.current = served.next = None

    def _tidy(self, served: Served) -> None:
        served.draining = [r for r in served.draining if not r.done.is_set()]

    def _live_runners(self) -> int:
        return sum(1 for s in self.served.values() for r in s.runners() if not r.done.is_set())

    def _freed(self, before: int) -> None:
        """A server is gone since the reconcile began: its memory may let a waiting service start."""
        if self._live_runners() < before:
            self._wake_waiting()

    def _runner(
        self,
        key: ObjectKey,
        command_for: Callable[[int], tuple[str, ...]],
        identity: str,
        need: int,
        priority: int,
        protected: bool,
        pass_fds: tuple[int, ...],
    ) -> Runner:
        assert self._probe_session is not None

        def changed() -> None:
            self.controller.enqueue(key)

        def announce(type_: str, reason: str, message: str) -> None:
            served = self.served.get(key)
            if served is not None:
                self._announce(served, type_, reason, message)

        return Runner(
            str(key),
            command_for,
            identity=identity,
            address=self.config.address,
            ports=self.config.ports,
            ports_in_use=self._ports_in_use,
            logs_dir=self.config.state_dir / "logs",
            session=self._probe_session,
            settings=self.config.supervision,
            drain=self.config.drain,
            on_change=changed,
            announce=announce,
            on_restart=lambda: metrics.RESTARTS.labels(key.namespace, key.name).inc(),
            need=need,
            priority=priority,
            protected=protected,
            pass_fds=pass_fds,
        )

    def _ports_in_use(self) -> set[int]:
        return {r.port for s in self.served.values() for r in s.runners() if r.port is not None}

    def _announce(self, served: Served, type_: str, reason: str, message: str) -> None:
        self._announce_key(served.key, type_, reason, message)

    def _announce_key(self, key: ObjectKey, type_: str, reason: str, message: str) -> None:
        raw = self.services.store.get_object(key.namespace, key.name)
        if raw is not None:
            self.manager.recorder.event(raw, type_, reason, message, action="Serve")

    # -- the state file, the metrics -------------------------------------------------------------------
    def _save_state(self) -> None:
        records = []
        for served in self.served.values():
            for role, runner in (("current", served.current), ("next", served.next)):
                if runner is None or runner.process is None or runner.stopping or runner.state is None:
                    continue
                if not runner.state.running:
                    continue
                process = runner.process
                records.append(
                    ServerRecord(
                        key=str(served.key),
                        uid=served.uid,
                        role=role,
                        pid=process.pid,
                        port=process.port,
                        command=process.command,
                        identity=runner.identity,
                        fingerprint=process.fingerprint,
                        log_path=str(process.log_path),
                        need=runner.need,
                        source_identity=runner.source_identity,
                    )
                )
        save(self.config.state_dir, records)

    def _snapshot(self) -> metrics.Snapshot:
        phases: dict[str, int] = {}
        held = resident = 0
        for served in self.served.values():
            for runner in served.runners():
                if runner.phase is None or runner.done.is_set():
                    continue
                phases[runner.phase.value] = phases.get(runner.phase.value, 0) + 1
                held += runner.need
                resident += runner.rss()
        beats = {(k.namespace, k.name): at for k, at in self.publisher.last_heartbeat.items()}
        return metrics.Snapshot(phases, self.config.budget, held, resident, beats)

    # -- memory pressure ------------------------------------------------------------------------------
    async def _watch_pressure(self) -> None:
        interval = self.config.pressure_interval
        if interval <= 0:
            await asyncio.Event().wait()
        while True:
            await asyncio.sleep(interval)
            available = await run_in_daemon_thread(host.available_memory, self.config.total_memory)
            if available is None:
                continue
            residents = [
                Resident(
                    str(s.key), s.current.need, s.current.priority, s.current.protected, s.current.started_at
                )
                for s in self.served.values()
                if s.current is not None and not s.current.stopping
            ]
            check = check_pressure(
                available,
                self.config.total_memory,
                self.config.pressure,
                servers_rss=sum(r.rss() for s in self.served.values() for r in s.runners()),
                residents=residents,
                agent=self.config.name,
            )
            level = check.level
            if level is not self._pressure:
                if level is Pressure.NORMAL:
                    log.info("host memory pressure is over", available=available)
                else:
                    log.warning("host memory pressure", level=level.value, available=available)
                previous, self._pressure = self._pressure, level
                if level is Pressure.NORMAL and previous is not Pressure.NORMAL:
                    self._wake_waiting()
            victim, message = check.victim, check.message
            if victim is None:
                continue
            served = self.served[ObjectKey.parse(victim.key)]
            served.evicted, served.evicted_under_pressure = message, True
            self._stop_all(served, message)
            metrics.EVICTIONS.labels("pressure").inc()
            self._announce(served, "Warning", EVICTED, message)
            log.warning("service evicted under memory pressure", service=victim.key, available=available)
            self.controller.enqueue(served.key)

    def _wake_waiting(self) -> None:
        """Room may have freed: reconcile the services waiting for it, highest priority first."""
        waiting = []
        for served in self.served.values():
            if served.current is None:
                raw = self.services.store.get_object(served.key.namespace, served.key.name)
                created = ((raw or {}).get("metadata") or {}).get("creationTimestamp") or ""
                waiting.append((Demand(str(served.key), 0, self._priority_of_key(served.key)), created))
        for demand in waiting_order(waiting):
            self.controller.enqueue(ObjectKey.parse(demand.key))

    def _priority_of_key(self, key: ObjectKey) -> int:
        """The priority the controller accepted for the service's spec (0 while it has not)."""
        isvc = _parse(InferenceService, self.services.store.get_object(key.namespace, key.name))
        return verdict_of(isvc).priority if isvc is not None else 0

    def _model(self, isvc: InferenceService | None) -> Model | None:
        if isvc is None:
            return None
        return _parse(Model, self.models.store.get_object(isvc.metadata.namespace or "", isvc.spec.model_ref))


def _parse(kind: type[T], raw: Obj | None) -> T | None:
    if raw is None:
        return None
    try:
        return kind.model_validate(raw)
    except ValidationError as error:
        log.warning("object does not match the API types", kind=kind.__name__, error=str(error)[:300])
        return None


def _server(runner: Runner | None) -> Server | None:
    """A server as the plan sees it."""
    if runner is None:
        return None
    return Server(
        identity=runner.identity,
        need=runner.need,
        started_at=runner.started_at,
        serving=runner.serving,
        stopping=runner.stopping,
        crashes=runner.state.crashes if runner.state is not None else 0,
        port=runner.port,
        report=runner.report(),
    )
