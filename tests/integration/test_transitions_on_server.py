"""Every spec transition is accepted by the API server and converges: a property test over pairs
of InferenceService specs, on a real kube-apiserver.

For each drawn pair (A, B): the objects planned for A are applied the way the controller applies
them (the same Applier, the same per-kind policies, the create-only fields), then the running
service is changed to B: B is planned against the objects A left and applied the same way, again
until a round writes nothing. The server must accept every write, and the plan must converge in at
most three rounds (a hand-over takes one more). The specs vary what changes the shape of the
Deployment: the GPU (from the service or the Model), the runtime and its generated variables, the
user's env (also with generated names), autoscaling and replicas, scheduling, ports and storage.
A defect of one transition (CPU -> GPU with a defaulted strategy, duplicate env keys, replicas
dropped to 1) is a member of this class."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from llmkube_testing.pytest_plugin import ClusterHandle

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.controllers.apply_policies import POLICIES_BY_KIND
from llmkube.kube.apply.applier import Applier, ApplyOutcome
from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.resource import DEPLOYMENTS, HORIZONTAL_POD_AUTOSCALERS, SERVICES, Resource
from llmkube.kube.rest import ApiClient, load_client_config
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import InferenceServicePlan, plan_inference_service

pytestmark = pytest.mark.integration

RESOURCES: dict[str, Resource] = {
    "deployment": DEPLOYMENTS,
    "service": SERVICES,
    "hpa": HORIZONTAL_POD_AUTOSCALERS,
}
TOKEN = {"name": "hf", "key": "token"}
MAX_ROUNDS = 3

runtimes = st.sampled_from(
    [
        {},
        {"runtime": "vllm", "vllmConfig": {"hfTokenSecretRef": TOKEN}},
        {"runtime": "vllm"},
        {"runtime": "tgi", "tgiConfig": {"hfTokenSecretRef": TOKEN}},
        {"runtime": "personaplex", "image": "registry.invalid/personaplex:1"},
        {"runtime": "generic", "image": "registry.invalid/server:1", "args": ["--serve"]},
    ]
)
env_vars = st.lists(
    st.sampled_from(
        [
            {"name": "HF_TOKEN", "value": "mine"},
            {"name": "HUGGING_FACE_HUB_TOKEN", "value": "mine"},
            {"name": "NO_TORCH_COMPILE", "value": "0"},
            {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ]
    ),
    unique_by=lambda var: var["name"],
    max_size=3,
)
specs = st.fixed_dictionaries(
    {"runtime": runtimes},
    optional={
        "resources": st.sampled_from([{"gpu": 1}, {"gpu": 2}, {"cpu": "500m", "memory": "1Gi"}]),
        "replicas": st.integers(0, 3),
        "autoscaling": st.sampled_from(
            [{"maxReplicas": 4}, {"minReplicas": 2, "maxReplicas": 5}, {"minReplicas": 1, "maxReplicas": 1}]
        ),
        "env": env_vars,
        "tolerations": st.just([{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
        "nodeSelector": st.just({"kubernetes.io/arch": "amd64"}),
        "podLabels": st.sampled_from([{"team": "a"}, {"team": "b", "tier": "gold"}]),
        "podAnnotations": st.just({"example.com/note": "x"}),
        "endpoint": st.sampled_from(
            [{"port": 9000}, {"port": 9000, "type": "NodePort"}, {"port": 9000, "type": "LoadBalancer"}]
        ),
        "containerPort": st.just(9001),
        "skipModelInit": st.booleans(),
        "priority": st.sampled_from(["high", "batch"]),
        "imagePullSecrets": st.just([{"name": "regcred"}]),
    },
).map(lambda drawn: {**drawn.pop("runtime"), **drawn})
models = st.sampled_from(
    [
        ("cpu", "https://models.invalid/tiny.gguf", None),
        ("hf", "Org/Repo-7B", None),
        ("one-gpu", "Org/Repo-7B", {"accelerator": "cuda", "gpu": {"count": 1}}),
        ("two-gpus", "https://models.invalid/big.gguf", {"accelerator": "cuda", "gpu": {"count": 2}}),
    ]
)
_names = (f"t{n}" for n in itertools.count())


def model_of(drawn: tuple[str, str, dict[str, Any] | None], namespace: str) -> Model:
    name, source, hardware = drawn
    spec: dict[str, Any] = {"source": source}
    if hardware:
        spec["hardware"] = hardware
    status = {"phase": "Ready", "cacheKey": "0123456789abcdef" if source.startswith("https") else ""}
    return Model.model_validate(
        {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status}
    )


def service_of(name: str, namespace: str, uid: str, spec: dict[str, Any], model: Model) -> InferenceService:
    return InferenceService.model_validate(
        {
            "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": 1},
            "spec": {"modelRef": model.metadata.name, **spec},
        }
    )


async def converge(
    applier: Applier, isvc: InferenceService, model: Model, live: dict[str, dict[str, Any] | None]
) -> int:
    """Apply the plan the way the controller does, round after round, until a round writes nothing;
    returns how many rounds wrote."""
    for rounds in range(MAX_ROUNDS + 1):
        observed = ObservedState(
            now=datetime.now(UTC), deployment=live["deployment"], service=live["service"], hpa=live["hpa"]
        )
        plan: InferenceServicePlan = plan_inference_service(isvc, model, observed, OperatorConfig())
        if plan.deployment is None:
            event(f"nothing to apply: {plan.status.phase}")  # an invalid spec is reported, not applied
            return rounds
        wrote = False
        for field, resource in RESOURCES.items():
            desired = getattr(plan, field)
            if desired is None:
                continue
            try:
                result = await applier.apply(
                    resource,
                    desired,
                    live[field],
                    policy=POLICIES_BY_KIND[resource.kind],
                    initial=plan.deployment_initial if field == "deployment" else None,
                )
            except ApiError as error:
                pytest.fail(f"the server refused the {resource.kind} of round {rounds}: {error}")
            live[field] = result.object
            wrote |= result.outcome is not ApplyOutcome.UNCHANGED
        for ref in plan.deletes:
            field = {"HorizontalPodAutoscaler": "hpa", "Deployment": "deployment"}[ref.kind]
            with contextlib.suppress(NotFound):
                await applier.client.delete(RESOURCES[field], ref.name, ref.namespace, uid=ref.uid)
            live[field] = None
            wrote = True
        if not wrote:
            return rounds
    pytest.fail(f"still writing after {MAX_ROUNDS} rounds")


@pytest.fixture(scope="module")
def transitions_namespace(api_cluster: ClusterHandle) -> str:
    name = f"transitions-{uuid.uuid4().hex[:6]}"
    api_cluster.admin().create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


async def previous_version(
    applier: Applier, isvc: InferenceService, model: Model, live: dict[str, dict[str, Any] | None]
) -> None:
    """What the previous controller version left: its Deployment had no `strategy` (the server's
    default, owned by nobody) and the count always applied; one plain apply of each object."""
    plan = plan_inference_service(isvc, model, ObservedState(now=datetime.now(UTC)), OperatorConfig())
    if plan.deployment is None:
        return
    deployment = {**plan.deployment, "spec": dict(plan.deployment["spec"])}
    del deployment["spec"]["strategy"]
    deployment["spec"].setdefault("replicas", isvc.spec.replicas if isvc.spec.replicas is not None else 1)
    live["deployment"] = (await applier.apply(DEPLOYMENTS, deployment, None)).object
    live["service"] = (await applier.apply(SERVICES, plan.service or {}, None)).object


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    before=specs,
    after=specs,
    model_before=models,
    model_after=models,
    from_previous_version=st.sampled_from([False, False, True]),
)
def test_every_transition_between_two_specs_is_accepted_and_converges(
    api_cluster: ClusterHandle,
    transitions_namespace: str,
    before: dict[str, Any],
    after: dict[str, Any],
    model_before: tuple[str, str, dict[str, Any] | None],
    model_after: tuple[str, str, dict[str, Any] | None],
    from_previous_version: bool,
) -> None:
    namespace, name, uid = transitions_namespace, next(_names), str(uuid.uuid4())
    first, second = model_of(model_before, namespace), model_of(model_after, namespace)
    event(f"model {model_before[0]} -> {model_after[0]}")
    event(f"autoscaling {'autoscaling' in before} -> {'autoscaling' in after}")
    event(f"from the previous version: {from_previous_version}")

    async def run() -> None:
        config = await load_client_config(api_cluster.kubeconfig)
        async with ApiClient.from_config(config) as client:
            applier = Applier(client)
            live: dict[str, dict[str, Any] | None] = {"deployment": None, "service": None, "hpa": None}
            start = previous_version if from_previous_version else converge
            await start(applier, service_of(name, namespace, uid, before, first), first, live)
            rounds = await converge(applier, service_of(name, namespace, uid, after, second), second, live)
            event(f"converged in {rounds} write rounds")
            for field, resource in RESOURCES.items():
                if live[field] is not None:
                    await client.delete(resource, live[field]["metadata"]["name"], namespace)

    asyncio.run(run())
