"""What the controller observed, read from its informer cache, handed to the planner as data."""

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from types import MappingProxyType

from llmkube.api.base import KubeObject
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.preemption import Preemption
from llmkube.plan.inferenceservice.queue import GpuQueue
from llmkube.plan.inferenceservice.scheduling import NodeGpus
from llmkube.plan.quota.decision import Grant
from llmkube.plan.tenancy import NamespacePolicy


@dataclass(frozen=True)
class ObservedState:
    now: datetime  # timezone-aware; planning never reads a clock
    deployment: KubeObject | None = None  # the Deployment named like the service, if cached
    service: KubeObject | None = None  # the Service with the sanitized name, if cached
    hpa: KubeObject | None = None  # the HPA named like the service, if cached
    pods: tuple[KubeObject, ...] = ()  # pods labelled inference.llmkube.dev/service=<name>
    priority_classes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))  # name -> value
    # Services whose stored phase is WaitingForGPU, cluster-wide, in queue order. The controller
    # hands over its live queue (kept in step with the cache); planning only asks it for a rank.
    gpu_queue: GpuQueue = field(default_factory=GpuQueue)
    endpoint_slices: tuple[KubeObject, ...] = ()  # metal path: slices of the service's namespace
    # The names of the cluster's RuntimeClasses; None when the controller does not know them.
    runtime_classes: frozenset[str] | None = None
    # Nodes as the controller caches them (capacity and GPU memory labels): the memory-fit check
    # compares with the largest GPU of the nodes that offer the service's GPU resource.
    nodes: tuple[KubeObject, ...] = ()
    # Per GPU resource, the most a single node offers (plan/inferenceservice/scheduling.py): a
    # service asking for more can never run. None when the controller does not know the cluster's
    # nodes: nothing is guessed.
    gpu_nodes: Mapping[str, NodeGpus] | None = None
    # A preemption of one of the service's pods by the scheduler that its status does not tell yet.
    preemption: Preemption | None = None
    # The last lines of the model-downloader's log, read only while a pod of the service runs it.
    download_log: str | None = None
    # What the service's namespace allows (its labels): Pod Security level, local sources, priority.
    namespace: NamespacePolicy = field(default_factory=NamespacePolicy)
    # The service's own model cache claim (per-service storage), as the controller caches it.
    service_cache_claim: KubeObject | None = None
    # Metal services: the master key their servers' keys derive from (server_key.py), as the
    # controller read it from its Secret; None when the service is not metal.
    server_key_master: bytes | None = None
    # v0.9 speculativeDecoding.draftModelRef: the draft Model, as cached (None: none named, or absent).
    draft_model: Model | None = None
    # What the GPU quotas covering the service let it hold (plan/quota/decision.py), decided by the
    # controller (the leader) just before planning; None: no quota covers it.
    quota: Grant | None = None
