"""Property test: for any spec valid under the contract schema, with any Model and any observed
facts, planning never raises, and what it plans is consistent (names, labels, selectors, owners,
no nulls or empty collections of our own making) and idempotent."""

from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from isvc_factories import NOW, UID, live_deployment, live_object, pod
from schema_strategies import from_schema

from llmkube.api.base import KubeObject
from llmkube.api.constants import LABEL_MANAGED_BY, LABEL_SERVICE, MANAGED_BY_VALUE
from llmkube.api.crds import contract_schema
from llmkube.api.inferenceservice import InferenceService, InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.controllers.isvc_indexes import priority_class_index
from llmkube.plan.apiserver.merge_keys import duplicate_keys, duplicate_merge_keys
from llmkube.plan.inferenceservice.agent_verdict import ACCEPTED
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.deployment import stored_env_var
from llmkube.plan.inferenceservice.gpu import is_metal
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import InferenceServicePlan, plan_inference_service
from llmkube.plan.inferenceservice.priority import priority_class_name
from llmkube.plan.inferenceservice.queue import GpuQueue, QueueEntry
from llmkube.plan.inferenceservice.status import status_changed

SPEC_SCHEMA = contract_schema()["properties"]["spec"]
PHASES = {"Pending", "Creating", "Progressing", "Ready", "WaitingForGPU", "Stopped", "Failed"}
# User-supplied Kubernetes sub-objects we pass on verbatim: we check the key is not empty, not inside.
VERBATIM = {
    "securityContext",
    "startupProbe",
    "livenessProbe",
    "readinessProbe",
    "tolerations",
    "env",
    "imagePullSecrets",
    "nodeSelector",
    "labels",
    "annotations",
}

names = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]{1,8}){0,2}", fullmatch=True)
quantities = st.sampled_from(["500m", "2", "1.5", "4Gi", "1024Mi", "1e3", "0"])


@st.composite
def mostly_valid(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    """Random contract-valid specs are nearly always semantically invalid (a random string is rarely a
    quantity); most examples get valid values where the schema cannot tell, so every path is explored."""
    if not draw(st.sampled_from([True] * 4 + [False])):
        return spec
    spec = dict(spec)
    if spec.get("resources") is not None:
        resources = dict(spec["resources"])
        for key in ("cpu", "memory", "hostMemory", "gpuMemory"):
            if resources.get(key) is not None:
                resources[key] = draw(quantities)
        spec["resources"] = resources
    if spec.get("priorityClassName"):
        spec["priorityClassName"] = draw(st.sampled_from(["custom", "llmkube-high", ""]))
    if not spec.get("image"):
        spec["image"] = draw(st.sampled_from([None, "img:1"]))
    if spec.get("autoscaling") is not None:
        autoscaling = dict(spec["autoscaling"])
        autoscaling["minReplicas"] = min(autoscaling.get("minReplicas") or 1, autoscaling["maxReplicas"])
        autoscaling["metrics"] = [
            {**m, "targetAverageValue": draw(quantities)} for m in autoscaling.get("metrics") or []
        ]
        spec["autoscaling"] = autoscaling
    return spec


models = st.builds(
    lambda source, hardware, phase, status: Model.model_validate(
        {
            "metadata": {"name": "m", "namespace": "ai"},
            "spec": {"source": source, **hardware},
            "status": {"phase": phase, **status},
        }
    ),
    source=st.sampled_from(
        [
            "https://host/x.gguf",
            "Org/Repo-7B",
            "pvc://weights/dir/x.gguf",
            "pvc://weights",
            "file:///data/x.gguf",
            "/data/x.gguf",
            "model.gguf",
        ]
    ),
    hardware=st.one_of(
        st.just({}),
        st.fixed_dictionaries(
            {
                "hardware": st.fixed_dictionaries(
                    {"accelerator": st.sampled_from(["cpu", "metal", "cuda", "rocm", "intel"])},
                    optional={
                        "gpu": st.fixed_dictionaries(
                            {},
                            optional={
                                "count": st.integers(0, 8),
                                "vendor": st.sampled_from(["nvidia", "amd", "intel"]),
                                "layers": st.integers(-1, 100),
                                "sharding": st.fixed_dictionaries(
                                    {
                                        "strategy": st.sampled_from(
                                            ["layer", "tensor", "row", "pipeline", "none"]
                                        )
                                    },
                                    optional={
                                        "layerSplit": st.lists(
                                            st.from_regex(r"\d{1,2}-\d{1,2}|x", fullmatch=True), max_size=4
                                        )
                                    },
                                ),
                            },
                        )
                    },
                )
            },
            optional={"refreshPolicy": st.sampled_from(["IfNotPresent", "OnChange"])},
        ),
    ),
    phase=st.sampled_from(["Ready"] * 8 + ["Pending", "Failed"]),
    status=st.fixed_dictionaries(
        {},
        optional={
            "cacheKey": st.sampled_from(["", "0123456789abcdef"]),
            "path": st.sampled_from(["", "/models/k/Real-Name.gguf"]),
            "gguf": st.just({"modelName": "Llama 3"}),
        },
    ),
)

configs = st.sampled_from(
    [
        OperatorConfig(),
        OperatorConfig(model_cache_path=""),
        OperatorConfig(
            ca_cert_configmap="corp-ca", default_fsgroup=0, model_cache_access_mode="ReadWriteMany"
        ),
        OperatorConfig(model_cache_size="lots"),
    ]
)


def foreign(obj: KubeObject) -> KubeObject:
    obj["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    return obj


@st.composite
def observations(draw: st.DrawFn, name: str) -> ObservedState:
    deployment = draw(
        st.sampled_from(
            [
                None,
                live_deployment(ready=draw(st.integers(0, 5)), replicas=draw(st.integers(0, 5)), name=name),
                live_deployment(selector={"app": name}, name=name),
                foreign(live_deployment(name=name)),
            ]
        )
    )
    hpa = draw(
        st.sampled_from(
            [
                None,
                live_object("autoscaling/v2", "HorizontalPodAutoscaler", name),
                foreign(live_object("autoscaling/v2", "HorizontalPodAutoscaler", name)),
            ]
        )
    )
    pods = draw(
        st.lists(
            st.sampled_from(
                [
                    pod("a"),
                    pod("b", "Pending"),
                    pod("c", "Pending", unschedulable="0/1 nodes: 1 Insufficient nvidia.com/gpu."),
                    pod("d", "Pending", unschedulable="0/1 nodes: 1 Insufficient memory."),
                    pod("e", deleting=True),
                ]
            ),
            max_size=3,
        )
    )
    age = draw(st.sampled_from([None, timedelta(seconds=10), timedelta(minutes=10)]))
    slice_meta: dict[str, Any] = {
        "name": "s",
        "namespace": "ai",
        "labels": {"kubernetes.io/service-name": name.replace(".", "-")},
    }
    if age is not None:
        slice_meta["annotations"] = {"llmkube.ai/agent-heartbeat": (NOW - age).isoformat()}
    slices = draw(
        st.sampled_from([(), ({"metadata": slice_meta, "endpoints": [{"addresses": ["10.0.0.1"]}]},)])
    )
    return ObservedState(
        now=NOW,
        deployment=deployment,
        hpa=hpa,
        pods=tuple(pods),
        priority_classes=draw(st.sampled_from([{}, {"llmkube-normal": 10_000, "custom": 5}])),
        gpu_queue=GpuQueue(
            draw(
                st.lists(
                    st.builds(QueueEntry, st.just("ai"), names, st.integers(0, 10**6), st.just(NOW)),
                    max_size=3,
                )
            )
        ),
        endpoint_slices=slices,
    )


def assert_compact(value: Any, path: str = "") -> None:
    """No None, and no empty list or map, anywhere we built the object ourselves."""
    assert value is not None, path
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "emptyDir":
                assert item == {}, path
            elif key in VERBATIM:
                assert item not in (None, {}, []), f"{path}.{key}"
            else:
                assert item not in ({}, []), f"{path}.{key}"
                assert_compact(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            assert_compact(item, f"{path}[{index}]")


def assert_owned(obj: KubeObject, isvc: InferenceService) -> None:
    meta = obj["metadata"]
    assert meta["namespace"] == isvc.metadata.namespace
    assert meta["labels"][LABEL_MANAGED_BY] == MANAGED_BY_VALUE
    (ref,) = meta["ownerReferences"]
    assert (ref["uid"], ref["name"], ref["controller"], ref["blockOwnerDeletion"]) == (
        UID,
        isvc.metadata.name,
        True,
        False,
    )


def assert_consistent(result: InferenceServicePlan, isvc: InferenceService, *, metal: bool = False) -> None:
    name = isvc.metadata.name
    assert result.status.phase in PHASES
    deployment, service, hpa = result.deployment, result.service, result.hpa
    if deployment is not None:
        assert_owned(deployment, isvc)
        assert_compact(deployment)
        assert deployment["metadata"]["name"] == name
        selector = deployment["spec"]["selector"]["matchLabels"]
        template_labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= template_labels.items()
        assert template_labels[LABEL_SERVICE] == name
        container_ports = {
            p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c["ports"]
        }
        assert service is not None
        assert_owned(service, isvc)
        assert_compact(service)
        assert service["spec"]["selector"] == selector
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= container_ports
    elif metal and service is not None:
        # A host agent serves it: the Service is ours, without a selector (the agents' EndpointSlices
        # are its endpoints), and no workload of ours exists.
        assert hpa is None
        assert_owned(service, isvc)
        assert_compact(service)
        assert "selector" not in service["spec"]
    else:
        assert service is None and hpa is None
    if hpa is not None:
        assert deployment is not None
        assert_owned(hpa, isvc)
        assert_compact(hpa)
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert "replicas" not in deployment["spec"] or deployment["spec"]["replicas"] == 0
    if result.cache_pvc is not None:
        assert_compact(result.cache_pvc)
    for ref in result.deletes:
        assert ref.namespace == isvc.metadata.namespace and ref.name == name


@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example],
)
@given(data=st.data())
def test_planning_never_raises_and_is_consistent(data: st.DataObject) -> None:
    spec_doc = data.draw(from_schema(SPEC_SCHEMA).flatmap(mostly_valid), label="spec")
    name = data.draw(names, label="name") if data.draw(st.sampled_from([True] * 5 + [False])) else "n" * 64
    spec = InferenceServiceSpec.model_validate(spec_doc)  # the API types accept every contract-valid spec
    # The cache index reads the class from the raw document: the same answer as the parsed spec.
    assert tuple(priority_class_index({"spec": spec_doc})) == (priority_class_name(spec),)
    isvc = InferenceService.model_validate(
        {
            "metadata": {
                "name": name,
                "namespace": "ai",
                "uid": UID,
                "generation": 2,
                "creationTimestamp": NOW,
            },
            "spec": spec.to_json(),
        }
    )
    # Hypothesis favours the first choice of sampled_from: the common case goes first.
    model = data.draw(models, label="model") if data.draw(st.sampled_from([True] * 5 + [False])) else None
    observed = data.draw(observations(name), label="observed")
    config = data.draw(configs, label="config")

    result = plan_inference_service(isvc, model, observed, config)
    event(f"phase {result.status.phase}")
    event("workload planned" if result.deployment is not None else "no workload")
    assert_consistent(result, isvc, metal=model is not None and is_metal(model))

    # Deterministic, and idempotent: fed its own status back, the plan asks for no status write.
    assert plan_inference_service(isvc, model, observed, config) == result
    replanned = plan_inference_service(
        isvc.model_copy(update={"status": result.status}), model, observed, config
    )
    assert not status_changed(result.status, replanned.status)
    assert replanned.deployment == result.deployment and replanned.deletes == result.deletes

    # Whatever happens next (other pods, Deployment, Model), no condition once written is removed:
    # a stale one says so (the rule in plan/conditions/standard.py; the runtime, hence VLLMSpecValid,
    # is fixed).
    later_model = data.draw(models, label="later model") if data.draw(st.booleans()) else None
    later = plan_inference_service(
        isvc.model_copy(update={"status": result.status}),
        later_model,
        data.draw(observations(name), label="later observed"),
        config,
    )
    written = {c.type for c in result.status.conditions or ()}
    if later_model is not None and not is_metal(later_model):
        # The one condition whose subject can leave: the host agents' verdict, once no host agent
        # serves it (a Model changed from metal). Kept, it would let an agent serve a later switch
        # back on a verdict of the old Model's.
        written.discard(ACCEPTED)
    assert written <= {c.type for c in later.status.conditions or ()}


# Names the runtimes generate themselves: a user entry of the same name must replace ours.
GENERATED_ENV = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "NO_TORCH_COMPILE", "MODEL_PATH", "USER_ONLY"]
TOKEN_REF = {"name": "hf", "key": "token"}


@st.composite
def colliding(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    """A spec whose env reuses generated names, with the runtime configs that generate them."""
    spec = dict(spec)
    runtime = draw(st.sampled_from(["vllm", "tgi", "personaplex", spec.get("runtime") or "llamacpp"]))
    spec["runtime"] = runtime
    config_field = {"vllm": "vllmConfig", "tgi": "tgiConfig", "personaplex": "personaPlexConfig"}
    if runtime in config_field and draw(st.booleans()):
        spec[config_field[runtime]] = {
            **(spec.get(config_field[runtime]) or {}),
            "hfTokenSecretRef": TOKEN_REF,
        }
    names_drawn = draw(st.lists(st.sampled_from(GENERATED_ENV), unique=True, max_size=3))
    values = st.sampled_from(
        [{"value": "mine"}, {}, {"valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    )
    spec["env"] = [{"name": name, **draw(values)} for name in names_drawn] or spec.get("env")
    return spec


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.large_base_example],
)
@given(data=st.data())
def test_no_planned_object_has_two_entries_with_one_merge_key(data: st.DataObject) -> None:
    """Every keyed list we build (env, ports, volumes, volume mounts, containers, image pull
    secrets, Service ports, owner references) has unique keys, whatever the user's spec generates
    next to it, unless the user's own list already repeats a key (reported as invalid input, not
    ours to resolve)."""
    spec_doc = data.draw(from_schema(SPEC_SCHEMA).flatmap(mostly_valid).flatmap(colliding), label="spec")
    spec = InferenceServiceSpec.model_validate(spec_doc)
    own_repeats = duplicate_keys(spec.env or []) + duplicate_keys(spec.image_pull_secrets or [])
    event("the user's own list repeats a key" if own_repeats else "the user's lists have unique keys")
    isvc = InferenceService.model_validate(
        {
            "metadata": {
                "name": "svc",
                "namespace": "ai",
                "uid": UID,
                "generation": 2,
                "creationTimestamp": NOW,
            },
            "spec": spec.to_json(),
        }
    )
    model = data.draw(models, label="model")
    observed = data.draw(observations("svc"), label="observed")
    result = plan_inference_service(isvc, model, observed, data.draw(configs, label="config"))
    for obj in (result.deployment, result.service):
        if obj is None:
            continue
        repeated = duplicate_merge_keys(obj)
        if own_repeats:
            continue  # the user's mistake: validation reports it before anything is applied
        assert repeated == [], repeated
    if result.deployment is not None and not own_repeats:
        (container,) = result.deployment["spec"]["template"]["spec"]["containers"]
        # The user's entries are there, exactly as given, after the generated ones.
        user_env = [stored_env_var(var) for var in spec.env or []]
        assert container.get("env", [])[len(container.get("env", [])) - len(user_env) :] == user_env
