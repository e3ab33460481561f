"""The quota gate over real cache stores: two services decided back to back, before either's
Deployment is in the cache, cannot both take the last GPU (the ledger counts the first admission);
a leader that starts empty counts what the cache shows; a release is counted once the cache shows it;
a selector quota covers namespaces by their labels."""

from typing import Any

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.controllers.quota_gate import QuotaGate
from llmkube.kube.cache import Change, Store
from llmkube.kube.types import ObjectKey
from llmkube.plan.quota.decision import QUOTA_EXCEEDED

API = "inference.llmkube.dev/v1alpha1"
NS = "team-a"


def service(name: str, gpus: int = 1, created: str = "2026-03-01T10:00:00Z", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": name, "namespace": NS, "creationTimestamp": created, "generation": 1},
        "spec": {"modelRef": "m", "resources": {"gpu": gpus}, **spec},
    }


MODEL = {
    "apiVersion": API,
    "kind": "Model",
    "metadata": {"name": "m", "namespace": NS, "generation": 1},
    "spec": {"source": "org/m", "hardware": {"accelerator": "cuda"}},
    "status": {"phase": "Ready", "observedGeneration": 1},
}


def quota(gpus: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "GPUQuota",
        "metadata": {"name": "team", "namespace": NS, "generation": 1},
        "spec": {"namespaceRef": NS, "gpuCount": gpus, **spec},
    }


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"replicas": replicas},
    }


class World:
    def __init__(self, *quotas: dict[str, Any]) -> None:
        self.quotas, self.services, self.models = Store(), Store(), Store()
        self.deployments, self.hpas, self.nodes, self.namespaces = Store(), Store(), Store(), Store()
        for q in quotas:
            self.quotas.upsert(q)
        self.models.upsert(MODEL)
        self.namespaces.upsert(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {"team": "a"}}}
        )
        self.gate = QuotaGate(
            quotas=self.quotas,
            services=self.services,
            models=self.models,
            deployments=self.deployments,
            hpas=self.hpas,
            nodes=self.nodes,
            namespaces=self.namespaces,
            gpu_resource=lambda model: "nvidia.com/gpu",
        )
        self.changed: list[str] = []
        self.gate.on_quota_changed = lambda keys: self.changed.extend(sorted(keys))

    def add(self, obj: dict[str, Any]) -> InferenceService:
        self.services.upsert(obj)
        return InferenceService.model_validate(obj)

    def plan(self, isvc: InferenceService, *, applied: bool = True) -> Any:
        """As the controller does: decide, then record, with nothing in between."""
        grant, claim = self.gate.decide(isvc, Model.model_validate(MODEL), 10_000, {})
        woken = self.gate.record((NS, isvc.metadata.name or ""), claim, applied=applied)
        return grant, woken


def test_back_to_back_decisions_never_share_the_last_gpu() -> None:
    world = World(quota(2))
    a, b, c = (world.add(service(n, created=f"2026-03-01T10:00:0{i}Z")) for i, n in enumerate("abc"))
    grants = [world.plan(s)[0] for s in (a, b, c)]  # no Deployment reaches the cache in between
    assert [g.replicas for g in grants] == [1, 1, 0]
    assert grants[2].reason == QUOTA_EXCEEDED
    assert grants[2].message == "GPUQuota team uses 2 of 2 GPUs, this replica needs 1"
    assert world.gate.waiters([f"{NS}/team"]) == [ObjectKey(NS, "c")]


def test_a_new_leader_counts_what_the_cache_shows() -> None:
    world = World(quota(2))
    world.add(service("old", gpus=2))
    world.deployments.upsert(deployment("old", 1))  # the previous leader's admission
    grant, _ = world.plan(world.add(service("new")))
    assert (grant.replicas, grant.message) == (0, "GPUQuota team uses 2 of 2 GPUs, this replica needs 1")


def test_a_scale_down_frees_gpus_once_the_cache_shows_it() -> None:
    world = World(quota(2))
    big = world.add(service("big", gpus=1, replicas=2))
    assert world.plan(big)[0].replicas == 2
    world.deployments.upsert(deployment("big", 2))
    waiter = world.add(service("waiter", created="2026-03-01T11:00:00Z"))
    assert world.plan(waiter)[0].replicas == 0
    # big scaled to 1: its ledger entry says 1 at once, its Deployment still says 2.
    _, woken = world.plan(world.add(service("big", gpus=1, replicas=1)))
    assert woken == {f"{NS}/team"}
    assert world.plan(waiter)[0].replicas == 0  # not before the cache shows the release
    old = deployment("big", 2)
    world.deployments.upsert(deployment("big", 1))
    keys = world.gate.follow_workload(Change("MODIFIED", old, deployment("big", 1)))
    assert keys == [ObjectKey(NS, "waiter")]
    assert world.plan(waiter)[0].replicas == 1


def test_a_deleted_service_releases_and_wakes_the_waiters() -> None:
    world = World(quota(1))
    holder = world.add(service("holder"))
    world.plan(holder)
    world.plan(world.add(service("waiter", created="2026-03-01T11:00:00Z")))
    world.services.delete(f"{NS}/holder")
    keys = world.gate.follow_service(Change("DELETED", service("holder"), None))
    assert keys == [ObjectKey(NS, "waiter")]
    assert world.changed[-1] == f"{NS}/team"


def test_a_raised_quota_wakes_its_waiters_and_covered_services() -> None:
    world = World(quota(0))
    world.plan(world.add(service("w")))
    keys = world.gate.follow_quota(Change("MODIFIED", quota(0), quota(1)))
    assert keys == [ObjectKey(NS, "w")]


def test_selector_quota_covers_namespaces_by_label_and_invalid_ones_cover_nothing() -> None:
    selector = {
        "apiVersion": API,
        "kind": "GPUQuota",
        "metadata": {"name": "org", "namespace": "kube-system"},
    }
    world = World(
        {**selector, "spec": {"selector": {"matchLabels": {"team": "a"}}, "gpuCount": 0}},
        {**selector, "metadata": {"name": "bad", "namespace": "x"}, "spec": {"gpuCount": 0}},
    )
    grant, _ = world.plan(world.add(service("s")))
    assert (grant.replicas, grant.quota) == (0, "kube-system/org")


def test_no_quota_no_claim() -> None:
    world = World()
    grant, woken = world.plan(world.add(service("free")))
    assert grant is None and woken == set()
    assert len(world.gate.ledger) == 0
