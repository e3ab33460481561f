"""The schema-driven fuzz: every object planned from any contract-valid InferenceService is accepted
by the API server, written as the controller writes it (server-side apply, its field manager, its
own identity bound to manifests/rbac), with server-side dry-run.

A spec the planner refuses (phase Failed, Degraded=True/InvalidSpec) must apply nothing: that is
the planner's job for everything the server would reject. So any refused write fails the test with
the spec that caused it (Hypothesis shrinks it to the smallest such spec).

Two properties:
- a fresh service: one spec, planned against an empty cluster;
- a transition: spec A is applied for real (a running service), then spec B is planned against the
  objects A left and dry-run applied, as the controller would on the next reconcile.

The number of examples comes from LLMKUBE_FUZZ_EXAMPLES (a small default for `make test`;
`make fuzz-long` asks for 300). LLMKUBE_FUZZ_KEEP_GOING=1 counts refusals instead of failing (to
measure a baseline). Either way, a summary line is printed: examples, objects written, refusals by
field, time.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import KubeRest, RestError, load_yaml_documents
from spec_fuzz import PRIORITY_CLASSES, mild_specs, model_of, model_shapes, names, wild_specs

from llmkube.api.constants import API_VERSION
from llmkube.api.crds import all_crds
from llmkube.api.inferenceservice import InferenceService
from llmkube.kube import yaml_json
from llmkube.kube.apply.compare import clean_intent
from llmkube.kube.rest import DEFAULT_FIELD_MANAGER
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import InferenceServicePlan, plan_inference_service

# A failing example's spec is large: Hypothesis warns about printing it, and the warning (an error
# under our filterwarnings) would hide the failure itself.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = int(os.environ.get("LLMKUBE_FUZZ_EXAMPLES", "25"))
KEEP_GOING = os.environ.get("LLMKUBE_FUZZ_KEEP_GOING") == "1"
APPLY = "application/apply-patch+yaml"
FIELDS = ("deployment", "service", "hpa")


@dataclass
class Tally:
    examples: int = 0
    planned: int = 0  # examples whose plan applies objects
    refused_by_planner: int = 0
    writes: int = 0
    refused: int = 0
    refused_examples: int = 0
    object_refusals: int = 0  # specs the planner refused for what it found in the objects
    false_alarms: int = 0  # ... of which the server would have accepted every object
    by_cause: collections.Counter[str] = field(default_factory=collections.Counter)
    samples: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def summary(self, name: str) -> str:
        return json.dumps(
            {
                "fuzz": name,
                "examples": self.examples,
                "planned": self.planned,
                "failed_by_planner": self.refused_by_planner,
                "writes": self.writes,
                "rejected_writes": self.refused,
                "examples_with_a_rejected_write": self.refused_examples,
                "refused_for_their_objects": self.object_refusals,
                "false_alarms": self.false_alarms,
                "seconds": round(time.monotonic() - self.started, 1),
                "rejections_by_field": dict(self.by_cause.most_common(25)),
            }
        )


@dataclass
class FuzzCluster:
    admin: KubeRest
    controller: KubeRest
    namespace: str


def install_rbac(cluster: ClusterHandle) -> None:
    docs: list[dict[str, Any]] = list(all_crds())
    docs += load_yaml_documents(ROOT / "manifests" / "manager" / "namespace.yaml")
    for path in sorted((ROOT / "manifests" / "rbac").glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += load_yaml_documents(path)
    apply_manifests(cluster, docs)


@pytest.fixture(scope="module")
def fuzz_cluster(api_cluster: ClusterHandle) -> Iterator[FuzzCluster]:
    install_rbac(api_cluster)
    assert api_cluster.controller_kubeconfig is not None, "the fuzz needs the controller's own identity"
    admin = api_cluster.admin()
    namespace = f"fuzz-{uuid.uuid4().hex[:6]}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    yield FuzzCluster(admin, KubeRest.from_kubeconfig(api_cluster.controller_kubeconfig), namespace)
    admin.delete("v1", "Namespace", namespace)


@pytest.fixture(scope="module")
def tallies(request: pytest.FixtureRequest) -> Iterator[dict[str, Tally]]:
    found: dict[str, Tally] = collections.defaultdict(Tally)
    yield found
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        for name, tally in found.items():
            print(f"\n{tally.summary(name)}")
            for sample in tally.samples[:5]:
                print(f"  e.g. {sample[:2000]}")


def isvc_of(name: str, namespace: str, spec: dict[str, Any], model: str, uid: str) -> InferenceService:
    return InferenceService.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid,
                "generation": 1,
                "creationTimestamp": "2026-01-01T00:00:00Z",
            },
            "spec": {**spec, "modelRef": model},
        }
    )


def as_stored(cluster: FuzzCluster, isvc: InferenceService) -> InferenceService:
    """The service as the controller reads it: created (dry run) and read back with the server's
    defaults. A spec the CRD refuses is the strategy's fault, not the planner's."""
    body = {
        "apiVersion": API_VERSION,
        "kind": "InferenceService",
        "metadata": {"name": isvc.metadata.name, "namespace": cluster.namespace},
        "spec": isvc.spec.to_json(),
    }
    path = cluster.admin.path_for(API_VERSION, "InferenceService", cluster.namespace)
    try:
        stored = cluster.admin.request("POST", path, encode_body(body), query={"dryRun": "All"})
    except RestError as error:
        if error.status == 422 and len(isvc.metadata.name or "") > 63:
            return isvc  # too long a name is the planner's to report (a label value)
        pytest.fail(f"the strategy drew a spec the CRD refuses: {error}\n{json.dumps(body)}")
    return isvc.model_copy(update={"spec": InferenceService.model_validate(stored).spec})


def planned_objects(plan: InferenceServicePlan) -> list[dict[str, Any]]:
    objects = [getattr(plan, name) for name in FIELDS]
    return [obj for obj in (*objects, plan.cache_pvc) if obj is not None]


def write(
    cluster: FuzzCluster, obj: dict[str, Any], *, dry_run: bool, as_written: bool = False
) -> dict[str, Any]:
    """As the controller: server-side apply with its field manager (the cache claim is created),
    the body cleaned and encoded as its applier and client do (`as_written`: not cleaned, with the
    user's empty fields still in it)."""
    body = dict(obj) if as_written else clean_intent(obj)
    meta = body["metadata"]
    query = {"dryRun": "All"} if dry_run else {}
    rest = cluster.controller
    if body["kind"] == "PersistentVolumeClaim":
        path = rest.path_for(body["apiVersion"], body["kind"], meta["namespace"])
        return rest.request("POST", path, encode_body(body), query=query)
    path = rest.path_for(body["apiVersion"], body["kind"], meta["namespace"], meta["name"])
    query |= {"fieldManager": DEFAULT_FIELD_MANAGER, "force": "true"}
    return rest.request("PATCH", path, encode_body(body), content_type=APPLY, query=query)


def encode_body(body: dict[str, Any]) -> bytes:
    return yaml_json.dumps(body)  # the controller's client encodes every apply so


def causes(error: RestError) -> list[str]:
    body = error.body if isinstance(error.body, dict) else {}
    found = [
        f"{error.status} {cause.get('field', '')}"
        for cause in (body.get("details") or {}).get("causes") or []
    ]
    return found or [f"{error.status} {body.get('reason', '')}"]


def check_plan(
    cluster: FuzzCluster,
    tally: Tally,
    plan: InferenceServicePlan,
    spec: dict[str, Any],
    *,
    dry_run: bool = True,
    live: dict[str, dict[str, Any]] | None = None,
    unchecked: Callable[[], InferenceServicePlan] | None = None,
) -> None:
    objects = planned_objects(plan)
    if plan.status.phase == "Failed":
        assert not objects, f"a Failed plan applies nothing, but planned {[o['kind'] for o in objects]}"
        tally.refused_by_planner += 1
        event("failed by the planner")
        if unchecked is not None:
            agree_with_the_server(cluster, tally, planned_objects(unchecked()), plan, spec)
        return
    if objects:
        tally.planned += 1
        event("objects planned")
    refused_before = tally.refused
    for obj in objects:
        tally.writes += 1
        try:
            stored = write(cluster, obj, dry_run=dry_run)
        except RestError as error:
            tally.refused += 1
            for cause in causes(error):
                tally.by_cause[f"{obj['kind']} {cause}"] += 1
            tally.samples.append(f"{obj['kind']} {error} <- spec {json.dumps(spec)[:600]}")
            if not KEEP_GOING:
                pytest.fail(
                    f"the API server refused the {obj['kind']} planned for this spec:\n{error}\n"
                    f"spec: {json.dumps(spec)}"
                )
            continue
        if live is not None and obj["kind"] != "PersistentVolumeClaim":
            live[obj["kind"]] = stored
    tally.refused_examples += tally.refused > refused_before


def agree_with_the_server(
    cluster: FuzzCluster,
    tally: Tally,
    objects: list[dict[str, Any]],
    plan: InferenceServicePlan,
    spec: dict[str, Any],
) -> None:
    """The planner refused a spec for what it found in the objects (they exist only without those
    checks): the server must refuse at least one of them too, else the planner cried wolf. The
    objects go as written: the applier drops empty fields (a probe `exec: {command: []}` would
    vanish), but the planner judges what the user wrote, as the server would."""
    if not objects:
        return  # refused before any object was built (quantities, classes...): not the server's call
    tally.object_refusals += 1
    for obj in objects:
        try:
            write(cluster, obj, dry_run=True, as_written=True)
        except RestError:
            return
    tally.false_alarms += 1
    degraded = next((c.message for c in plan.status.conditions or () if c.type == "Degraded"), "")
    tally.samples.append(f"false alarm: {degraded} <- spec {json.dumps(spec)[:600]}")
    if not KEEP_GOING:
        pytest.fail(f"the planner refused what the API server accepts: {degraded}\nspec: {json.dumps(spec)}")


def without_object_checks(
    isvc: InferenceService, shape: tuple[str, str, dict[str, Any] | None], **observed: Any
) -> Callable[[], InferenceServicePlan]:
    """The plan as it would be if the planner did not check its objects (for `agree_with_the_server`)."""

    def unchecked() -> InferenceServicePlan:
        with mock.patch("llmkube.plan.inferenceservice.planner.object_issues", return_value=[]):
            result: InferenceServicePlan = plan_for(isvc, shape, **observed)
        return result

    return unchecked


def plan_for(isvc: InferenceService, shape: tuple[str, str, dict[str, Any] | None], **observed: Any) -> Any:
    model = model_of(*shape, namespace=isvc.metadata.namespace or "")
    state = ObservedState(now=datetime.now(UTC), priority_classes=PRIORITY_CLASSES, **observed)
    return plan_inference_service(isvc, model, state, OperatorConfig())


specs = st.one_of(wild_specs, mild_specs, mild_specs)
FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)


@FUZZ_SETTINGS
@given(spec=specs, shape=model_shapes, name=names)
def test_every_object_planned_for_a_fuzzed_spec_is_accepted(
    fuzz_cluster: FuzzCluster,
    tallies: dict[str, Tally],
    spec: dict[str, Any],
    shape: tuple[str, str, dict[str, Any] | None],
    name: str,
) -> None:
    tally = tallies["fresh"]
    tally.examples += 1
    isvc = as_stored(fuzz_cluster, isvc_of(name, fuzz_cluster.namespace, spec, shape[0], str(uuid.uuid4())))
    check_plan(fuzz_cluster, tally, plan_for(isvc, shape), spec, unchecked=without_object_checks(isvc, shape))


def live_objects(cluster: FuzzCluster, plan: InferenceServicePlan) -> dict[str, dict[str, Any]]:
    """Spec A's objects, applied for real as the controller: a running service."""
    live: dict[str, dict[str, Any]] = {}
    for obj in planned_objects(plan):
        if obj["kind"] == "PersistentVolumeClaim":
            continue  # shared by the namespace; the dry run of B checks it
        # The fresh property reports A's own refusals; here A is only the starting point.
        with contextlib.suppress(RestError):
            live[obj["kind"]] = write(cluster, obj, dry_run=False)
    return live


def delete_all(cluster: FuzzCluster, live: dict[str, dict[str, Any]]) -> None:
    for obj in live.values():
        meta = obj["metadata"]
        try:
            cluster.admin.delete(obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"])
        except RestError as error:
            if error.status != 404:
                raise


@FUZZ_SETTINGS
@given(before=mild_specs, after=specs, shape_before=model_shapes, shape_after=model_shapes)
def test_every_object_planned_for_a_fuzzed_transition_is_accepted(
    fuzz_cluster: FuzzCluster,
    tallies: dict[str, Tally],
    before: dict[str, Any],
    after: dict[str, Any],
    shape_before: tuple[str, str, dict[str, Any] | None],
    shape_after: tuple[str, str, dict[str, Any] | None],
) -> None:
    tally = tallies["transition"]
    tally.examples += 1
    name, uid = f"t-{uuid.uuid4().hex[:10]}", str(uuid.uuid4())
    first = as_stored(fuzz_cluster, isvc_of(name, fuzz_cluster.namespace, before, shape_before[0], uid))
    live = live_objects(fuzz_cluster, plan_for(first, shape_before))
    event(f"running objects: {len(live)}")
    try:
        second = as_stored(fuzz_cluster, isvc_of(name, fuzz_cluster.namespace, after, shape_after[0], uid))
        running = {
            "deployment": live.get("Deployment"),
            "service": live.get("Service"),
            "hpa": live.get("HorizontalPodAutoscaler"),
        }
        plan = plan_for(second, shape_after, **running)
        check_plan(
            fuzz_cluster, tally, plan, after, unchecked=without_object_checks(second, shape_after, **running)
        )
    finally:
        delete_all(fuzz_cluster, live)
