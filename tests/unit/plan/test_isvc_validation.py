"""Validation the schema cannot express, warnings, events and the spec conditions."""

from typing import Any

import pytest
from isvc_factories import gpu_model, live_deployment, make_isvc, make_model, observe
from isvc_planning import condition, plan

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.validation import RUNTIME_FIELDS
from llmkube.plan.tenancy import TenancyPolicy

# A custom PriorityClass is used only where the admin lists it (plan/tenancy.py).
TEAM_GOLD_ALLOWED = OperatorConfig(tenancy=TenancyPolicy(allowed_priority_classes=frozenset({"team-gold"})))

# (case, spec, model, config, field named, value named)
ERRORS: list[tuple[str, dict[str, Any], Any, OperatorConfig, str, str]] = [
    ("cpu", {"resources": {"cpu": "two"}}, make_model(), OperatorConfig(), "spec.resources.cpu", '"two"'),
    (
        "memory",
        {"resources": {"memory": "4GB"}},
        make_model(),
        OperatorConfig(),
        "spec.resources.memory",
        '"4GB"',
    ),
    (
        "hostMemory",
        {"resources": {"hostMemory": "lots"}},
        make_model(),
        OperatorConfig(),
        "spec.resources.hostMemory",
        '"lots"',
    ),
    (
        "gpuMemory",
        {"resources": {"gpuMemory": "16 Gi"}},
        make_model(),
        OperatorConfig(),
        "spec.resources.gpuMemory",
        '"16 Gi"',
    ),
    (
        "negative cpu",
        {"resources": {"cpu": "-1"}},
        make_model(),
        OperatorConfig(),
        "spec.resources.cpu",
        '"-1"',
    ),
    (
        "generic without image",
        {"runtime": "generic"},
        make_model(),
        OperatorConfig(),
        "spec.image",
        '"generic"',
    ),
    (
        "personaplex without image",
        {"runtime": "personaplex"},
        make_model(),
        OperatorConfig(),
        "spec.image",
        '"personaplex"',
    ),
    (
        "unknown custom PriorityClass",
        {"priorityClassName": "team-gold"},
        make_model(),
        TEAM_GOLD_ALLOWED,
        "spec.priorityClassName",
        '"team-gold"',
    ),
    (
        "HPA min above max",
        {"autoscaling": {"minReplicas": 4, "maxReplicas": 2}},
        make_model(),
        OperatorConfig(),
        "spec.autoscaling.minReplicas",
        "maxReplicas 2",
    ),
    (
        "Pods metric without target",
        {"autoscaling": {"maxReplicas": 2, "metrics": [{"type": "Pods", "name": "q"}]}},
        make_model(),
        OperatorConfig(),
        "spec.autoscaling.metrics[0].targetAverageValue",
        '"q"',
    ),
    ("service name too long", {}, make_model(), OperatorConfig(), "metadata.name", "64 characters"),
    (
        "modelRef too long",
        {"modelRef": "m" * 70},
        make_model(name="m" * 70),
        OperatorConfig(),
        "spec.modelRef",
        "70 characters",
    ),
    (
        "invalid pvc source",
        {},
        make_model("pvc://claim-only"),
        OperatorConfig(),
        "model.spec.source",
        '"pvc://claim-only"',
    ),
    (
        "local source without cache",
        {},
        make_model("/data/m.gguf"),
        OperatorConfig(model_cache_path=""),
        "model.spec.source",
        '"/data/m.gguf"',
    ),
    (
        "invalid cache size",
        {},
        make_model(),
        OperatorConfig(model_cache_size="100 GB"),
        "operator --model-cache-size",
        '"100 GB"',
    ),
    (
        "model larger than the ephemeral cache",
        {},
        make_model(status={"size": "4.6 GiB"}),
        OperatorConfig(model_storage="ephemeral", ephemeral_cache_size_limit="1Gi"),
        "model.status.size",
        "4.6 GiB, more than the ephemeral cache holds (1Gi",
    ),
]


@pytest.mark.parametrize(
    ("case", "spec", "model", "config", "field", "value"), ERRORS, ids=[e[0] for e in ERRORS]
)
def test_errors_fail_the_service_with_field_and_value_and_apply_nothing(
    case: str, spec: dict[str, Any], model: Any, config: OperatorConfig, field: str, value: str
) -> None:
    name = "x" * 64 if case == "service name too long" else "demo"
    live = live_deployment(ready=1, name=name)
    result = plan(
        isvc=make_isvc(spec, name=name), model=model, config=config, observed=observe(deployment=live)
    )
    assert result.status.phase == "Failed"
    degraded = condition(result, "Degraded")
    assert degraded is not None and degraded[:2] == ("True", "InvalidSpec")
    assert field in degraded[2] and value in degraded[2], degraded[2]
    # The running workload is left alone: nothing applied, nothing deleted.
    assert (result.deployment, result.service, result.hpa, result.cache_pvc, result.deletes) == (
        None,
        None,
        None,
        None,
        (),
    )
    assert result.status.ready_replicas == 1 and result.status.endpoint is None
    assert [(e.type, e.reason) for e in result.events if e.reason == "InvalidSpec"] == [
        ("Warning", "InvalidSpec")
    ]
    assert field in next(e.message for e in result.events if e.reason == "InvalidSpec")


def test_every_error_is_reported_at_once() -> None:
    result = plan({"runtime": "generic", "resources": {"cpu": "x", "memory": "y"}})
    degraded = condition(result, "Degraded")
    assert degraded is not None
    for field in ("spec.resources.cpu", "spec.resources.memory", "spec.image"):
        assert field in degraded[2]
    assert sum(e.reason == "InvalidSpec" for e in result.events) == 3


def test_ready_is_zero_when_failing_without_a_workload() -> None:
    assert plan({"resources": {"cpu": "x"}}).status.ready_replicas == 0


def test_existing_custom_priority_class_is_used() -> None:
    result = plan(
        {"priorityClassName": "team-gold"},
        observed=observe(priority_classes={"team-gold": 500_000}),
        config=TEAM_GOLD_ALLOWED,
    )
    assert result.status.phase == "Creating" and result.status.effective_priority == 500_000
    assert result.deployment is not None
    assert result.deployment["spec"]["template"]["spec"]["priorityClassName"] == "team-gold"


def test_effective_priority_is_the_observed_value() -> None:
    result = plan({"priority": "high"}, observed=observe(priority_classes={"llmkube-high": 100_001}))
    assert result.status.effective_priority == 100_001
    assert plan({"priority": "batch"}).status.effective_priority == 100


# (case, spec, model, warning field)
WARNINGS: list[tuple[str, dict[str, Any], Any, str]] = [
    ("args on llamacpp", {"args": ["--x"]}, make_model(), "spec.args"),
    (
        "extraArgs on generic",
        {"runtime": "generic", "image": "i", "extraArgs": ["--x"]},
        make_model(),
        "spec.extraArgs",
    ),
    ("contextSize on vllm", {"runtime": "vllm", "contextSize": 4096}, make_model(), "spec.contextSize"),
    ("vllmConfig on llamacpp", {"vllmConfig": {}}, make_model(), "spec.vllmConfig"),
    (
        "tgiConfig on vllm",
        {"runtime": "vllm", "tgiConfig": {"dtype": "float16"}},
        make_model(),
        "spec.tgiConfig",
    ),
    (
        "personaPlexConfig on tgi",
        {"runtime": "tgi", "personaPlexConfig": {"cpuOffload": True}},
        make_model(),
        "spec.personaPlexConfig",
    ),
    (
        "parallelSlots on personaplex",
        {"runtime": "personaplex", "image": "i", "parallelSlots": 2},
        make_model(),
        "spec.parallelSlots",
    ),
    ("flash attention without GPU", {"flashAttention": True}, make_model(), "spec.flashAttention"),
    (
        "budget message without budget",
        {"reasoningBudgetMessage": "stop"},
        make_model(),
        "spec.reasoningBudgetMessage",
    ),
    (
        "vLLM CPU offload without GPU",
        {"runtime": "vllm", "vllmConfig": {"cpuOffloadGB": 4}},
        make_model(),
        "spec.vllmConfig.cpuOffloadGB",
    ),
    (
        "vLLM memory utilization without GPU",
        {"runtime": "vllm", "vllmConfig": {"gpuMemoryUtilization": 0.5}},
        make_model(),
        "spec.vllmConfig.gpuMemoryUtilization",
    ),
    (
        "autoscaling on metal",
        {"autoscaling": {"maxReplicas": 2}},
        make_model(hardware={"accelerator": "metal"}),
        "spec.autoscaling",
    ),
    (
        "default autoscaling metric on generic",
        {"runtime": "generic", "image": "i", "autoscaling": {"maxReplicas": 2}},
        make_model(),
        "spec.autoscaling.metrics",
    ),
    (
        "default autoscaling metric on personaplex",
        {"runtime": "personaplex", "image": "i", "autoscaling": {"maxReplicas": 2}},
        make_model(),
        "spec.autoscaling.metrics",
    ),
]


@pytest.mark.parametrize(("case", "spec", "model", "field"), WARNINGS, ids=[w[0] for w in WARNINGS])
def test_warnings_are_reported_and_do_not_block(
    case: str, spec: dict[str, Any], model: Any, field: str
) -> None:
    result = plan(spec, model)
    assert result.status.phase != "Failed"
    spec_valid = condition(result, "SpecValid")
    assert spec_valid is not None and spec_valid[:2] == ("False", "IgnoredSettings")
    assert field in spec_valid[2]
    assert any(e.reason == "IgnoredSetting" and field in e.message for e in result.events)


@pytest.mark.parametrize(
    "spec",
    [
        {"flashAttention": False, "args": [], "extraArgs": []},
        {"runtime": "vllm", "vllmConfig": {"cpuOffloadGB": 4}, "extraArgs": ["--x"], "parallelSlots": 3},
        {"runtime": "tgi", "parallelSlots": 3, "extraArgs": ["--x"], "tgiConfig": {}},
        {"reasoningBudget": 0, "reasoningBudgetMessage": "m"},
    ],
)
def test_no_warning_for_honoured_settings(spec: dict[str, Any]) -> None:
    result = plan(spec, gpu_model(1))
    assert condition(result, "SpecValid") is None
    assert not any(e.reason == "IgnoredSetting" for e in result.events)


def test_spec_valid_turns_true_once_fixed_and_is_never_added_otherwise() -> None:
    stale = {
        "conditions": [
            {
                "type": "SpecValid",
                "status": "False",
                "reason": "IgnoredSettings",
                "message": "spec.args: is ignored",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    fixed = plan(isvc=make_isvc(status=stale))
    assert condition(fixed, "SpecValid") == ("True", "Valid", "Every setting is applied")
    assert condition(plan(), "SpecValid") is None


def test_runtime_fields_table_names_real_spec_fields() -> None:
    fields = set(InferenceServiceSpec.model_validate({"modelRef": "m"}).model_dump(by_alias=True))
    assert set(RUNTIME_FIELDS) <= fields


def vllm_condition(status: dict[str, Any] | None, spec: dict[str, Any]) -> tuple[str, str, str] | None:
    return condition(plan(isvc=make_isvc(spec, status=status)), "VLLMSpecValid")


EXISTING_VLLM = {
    "conditions": [
        {
            "type": "VLLMSpecValid",
            "status": "False",
            "reason": "SpeculativeMissingModel",
            "message": "x",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
}
MISSING_DRAFT = {"runtime": "vllm", "vllmConfig": {"speculative": {"enabled": True}}}


@pytest.mark.parametrize(
    ("status", "spec", "expected"),
    [
        (None, MISSING_DRAFT, ("False", "SpeculativeMissingModel")),
        (None, {"runtime": "vllm"}, None),  # always valid: never added
        (
            EXISTING_VLLM,
            {"runtime": "vllm", "vllmConfig": {"speculative": {"enabled": True, "model": "d"}}},
            ("True", "ConfigValid"),
        ),
        (EXISTING_VLLM, {"runtime": "llamacpp"}, None),  # another runtime: removed
        (None, {"runtime": "vllm", "vllmConfig": {"speculative": {"enabled": False}}}, None),
    ],
)
def test_vllm_spec_valid(
    status: dict[str, Any] | None, spec: dict[str, Any], expected: tuple[str, str] | None
) -> None:
    found = vllm_condition(status, spec)
    assert (found[:2] if found else None) == expected


def test_vllm_spec_valid_message_and_non_blocking() -> None:
    result = plan(MISSING_DRAFT)
    found = condition(result, "VLLMSpecValid")
    assert found is not None and "speculative.model is empty" in found[2]
    assert result.deployment is not None and result.status.phase == "Creating"


@pytest.mark.parametrize(
    ("spec", "emitted"),
    [
        ({"moeCPUOffload": True}, True),
        ({"noKvOffload": True}, True),
        ({"moeCPUOffload": True, "resources": {"memory": "64Gi"}}, False),
        ({"noKvOffload": True, "resources": {"hostMemory": "64Gi"}}, False),
        ({"noKvOffload": True, "resources": {"cpu": "4"}}, True),
        ({"moeCPUOffload": False, "noKvOffload": False}, False),
        ({}, False),
    ],
)
def test_missing_memory_request_event(spec: dict[str, Any], emitted: bool) -> None:
    events = [e for e in plan(spec).events if e.reason == "MissingMemoryRequest"]
    assert len(events) == (1 if emitted else 0)
    assert all(e.type == "Warning" and "hostMemory" in e.message for e in events)


@pytest.mark.parametrize(
    ("source", "spec", "emitted"),
    [
        ("Qwen/Qwen2.5-0.5B-Instruct", {}, True),
        ("Qwen/Qwen2.5-0.5B-Instruct", {"runtime": "vllm"}, True),
        ("Qwen/Qwen2.5-0.5B-Instruct", {"skipModelInit": True}, False),
        ("Qwen/Qwen2.5-0.5B-Instruct", {"skipModelInit": False}, True),
        ("Qwen/Qwen2.5-0.5B-Instruct", {"runtime": "tgi"}, False),  # TGI never gets an init container
        ("https://host/x.gguf", {}, False),
        ("pvc://c/x.gguf", {}, False),
    ],
)
def test_missing_skip_model_init_event(source: str, spec: dict[str, Any], emitted: bool) -> None:
    events = [
        e for e in plan(spec, make_model(source, cache_key="")).events if e.reason == "MissingSkipModelInit"
    ]
    assert len(events) == (1 if emitted else 0)
    assert all(source in e.message and "skipModelInit" in e.message for e in events)


def test_autoscaling_a_runtime_that_does_not_export_its_default_metric_is_warned_about() -> None:
    """The generic runtime's HPA falls back to llama.cpp's metric, which the user's own server does not
    export: the HPA is still created as the spec says, and SpecValid names the field that fixes it."""
    spec = {"runtime": "generic", "image": "i", "autoscaling": {"maxReplicas": 3}}
    result = plan(spec)
    spec_valid = condition(result, "SpecValid")
    assert spec_valid is not None and spec_valid[2] == (
        "spec.autoscaling.metrics: is empty, so the HorizontalPodAutoscaler scales on "
        'llamacpp:requests_processing, which runtime "generic" does not export: it never scales; name '
        "the metric your server exports (a Pods metric, served by a custom metrics adapter) or cpu or "
        "memory (Resource)"
    )
    assert result.hpa is not None
    assert result.hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "llamacpp:requests_processing"
    # A metric named, or a runtime that exports its own: nothing to say.
    named = {
        **spec,
        "autoscaling": {
            "maxReplicas": 3,
            "metrics": [{"type": "Pods", "name": "queue_depth", "targetAverageValue": "4"}],
        },
    }
    for quiet in (
        named,
        {"autoscaling": {"maxReplicas": 3}},
        {"runtime": "vllm", "autoscaling": {"maxReplicas": 3}},
    ):
        assert condition(plan(quiet), "SpecValid") is None, quiet


def test_no_events_on_the_model_gate() -> None:
    assert plan({"moeCPUOffload": True, "resources": {"cpu": "x"}}, make_model(phase="Pending")).events == ()


def test_a_replica_count_on_an_autoscaled_service_is_answered_with_who_owns_it() -> None:
    """`kubectl scale --replicas=3` of an autoscaled service sets spec.replicas, which the HPA
    overrides: SpecValid and an IgnoredSetting event say so; the HPA stays in charge."""
    result = plan({"replicas": 9, "autoscaling": {"minReplicas": 1, "maxReplicas": 4}})
    spec_valid = condition(result, "SpecValid")
    assert spec_valid is not None and spec_valid[:2] == ("False", "IgnoredSettings")
    assert spec_valid[2] == (
        "spec.replicas: 9 is outside the autoscaling bounds (1-4): the HorizontalPodAutoscaler owns the "
        "replica count, spec.replicas only sets the starting count of a new Deployment (within the "
        "bounds); change spec.autoscaling, or set replicas to 0 to stop it"
    )
    assert [(e.type, e.reason) for e in result.events] == [("Warning", "IgnoredSetting")]
    assert result.hpa is not None
    assert "replicas" not in result.deployment["spec"]  # type: ignore[index]
    # Within the bounds it is the starting count of a new Deployment; 0 stops: nothing to say.
    for replicas in (1, 3, 4, 0):
        assert condition(plan({"replicas": replicas, "autoscaling": {"maxReplicas": 4}}), "SpecValid") is None


METAL_MODELS = [
    make_model(hardware={"accelerator": "metal"}),
    make_model(source="/Users/me/models/q.gguf", hardware={"accelerator": "metal"}),
    make_model(hardware={"accelerator": "metal", "gpu": {"count": 1}}),
]


@pytest.mark.parametrize("model", METAL_MODELS)
@pytest.mark.parametrize(
    "spec",
    [
        # The reference's metal samples: flash attention is on by default on Metal, and honoured.
        {"flashAttention": True, "jinja": True, "contextSize": 262144, "parallelSlots": 2},
        {"flashAttention": False},
        {"flashAttention": True, "cacheTypeCustomK": "turbo3", "cacheTypeCustomV": "turbo3"},
    ],
)
def test_flash_attention_is_not_ignored_on_the_metal_path(model: Any, spec: dict[str, Any]) -> None:
    """A host agent runs the server, on its own hardware: the controller knows no GPU count there,
    and flash attention is what the agent passes on (on by default for Metal)."""
    result = plan(spec, model)
    assert condition(result, "SpecValid") is None
    assert not any(e.reason == "IgnoredSetting" for e in result.events)
