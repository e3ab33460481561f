"""The per-service model cache (plan/inferenceservice/service_cache.py): its name, its size, what a
service is told about it, and how the planner uses it."""

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.apiserver.kube_syntax import dns1123_label_errors
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import plan_inference_service
from llmkube.plan.inferenceservice.service_cache import (
    ANNOTATION_FIELD,
    CACHE_NOT_RESIZED,
    CACHE_NOT_SHARED,
    CACHE_SIZE_ANNOTATION,
    CacheProblem,
    ServiceCache,
    plan_service_cache,
    service_cache_claim_name,
    service_cache_intent,
)
from llmkube.plan.inferenceservice.storage import ModelStorage, plan_storage

UID = "5b1c9c2e-0000-4000-8000-000000000001"
KEY = "0123456789abcdef"
PER_SERVICE = OperatorConfig(model_storage="per-service", max_service_cache_size="10Gi")
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def service(name: str = "demo", annotations: dict[str, str] | None = None, **spec: Any) -> InferenceService:
    meta: dict[str, Any] = {"name": name, "namespace": "ai", "uid": UID, "generation": 1}
    if annotations is not None:
        meta["annotations"] = annotations
    return InferenceService.model_validate({"metadata": meta, "spec": {"modelRef": "tiny", **spec}})


def model(size: str | None = "1.5 GiB", source: str = "https://host/x.gguf") -> Model:
    status: dict[str, Any] = {"phase": "Ready", "observedGeneration": 1, "cacheKey": KEY}
    if size is not None:
        status["size"] = size
    return Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ai", "generation": 1},
            "spec": {"source": source},
            "status": status,
        }
    )


def claim(size: str, name: str = "demo-model-cache") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": "ai",
            "ownerReferences": [
                {
                    "apiVersion": "inference.llmkube.dev/v1alpha1",
                    "kind": "InferenceService",
                    "name": "demo",
                    "uid": UID,
                    "controller": True,
                }
            ],
        },
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


# -- the claim's name --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("service_name", "expected"),
    [
        ("demo", "demo-model-cache"),
        ("a" * 51, "a" * 51 + "-model-cache"),  # 63 characters exactly: kept as it is
    ],
)
def test_a_short_name_is_the_service_name_and_the_suffix(service_name: str, expected: str) -> None:
    assert service_cache_claim_name(service_name) == expected


@pytest.mark.parametrize("service_name", ["a" * 52, "llama.cpp-8b", "x" * 200, "v1.2.3", "..."])
def test_other_names_are_dns_labels_made_unique_by_a_hash(service_name: str) -> None:
    name = service_cache_claim_name(service_name)
    assert not dns1123_label_errors(name), name
    assert len(name) <= 63 and name.endswith("-model-cache")
    assert name == service_cache_claim_name(service_name)  # stable across reconciles


def test_names_that_would_be_made_alike_are_told_apart_by_the_hash() -> None:
    # "a.b" and "a-b" both become "a-b..." once made label-safe; "a-b" is already a label.
    assert service_cache_claim_name("a-b") == "a-b-model-cache"
    assert service_cache_claim_name("a.b") != service_cache_claim_name("a-b")
    assert service_cache_claim_name("a" * 60 + "1") != service_cache_claim_name("a" * 60 + "2")


# -- its size ----------------------------------------------------------------------------------

SIZES: list[tuple[str, dict[str, str] | None, str | None, OperatorConfig, str]] = [
    # (case, annotations, model size, config, the size the claim is made with)
    ("the model and a quarter, whole GiB", None, "1.5 GiB", PER_SERVICE, "2Gi"),
    ("at least 1Gi", None, "20.0 MiB", PER_SERVICE, "1Gi"),
    ("exactly a GiB with headroom rounds up", None, "4.0 GiB", PER_SERVICE, "5Gi"),
    ("the headroom bounded by the maximum", None, "9.0 GiB", PER_SERVICE, "10Gi"),
    ("a model of the maximum's size still fits", None, "10.0 GiB", PER_SERVICE, "10Gi"),
    ("an unmeasured model gets the maximum", None, None, PER_SERVICE, "10Gi"),
    ("the operator's size", None, "1.5 GiB", replace(PER_SERVICE, service_cache_size="3Gi"), "3Gi"),
    (
        "the annotation over the flag",
        {CACHE_SIZE_ANNOTATION: "4Gi"},
        "1.5 GiB",
        replace(PER_SERVICE, service_cache_size="3Gi"),
        "4Gi",
    ),
    ("the annotation up to the maximum", {CACHE_SIZE_ANNOTATION: "10Gi"}, "1.5 GiB", PER_SERVICE, "10Gi"),
    ("the annotation canonical", {CACHE_SIZE_ANNOTATION: " 2048Mi "}, "1.5 GiB", PER_SERVICE, "2Gi"),
]


@pytest.mark.parametrize(
    ("annotations", "size", "config", "expected"),
    [case[1:] for case in SIZES],
    ids=[case[0] for case in SIZES],
)
def test_the_size_a_new_claim_is_made_with(
    annotations: dict[str, str] | None, size: str | None, config: OperatorConfig, expected: str
) -> None:
    planned = plan_service_cache(service(annotations=annotations), model(size), config, None)
    assert planned == ServiceCache("demo-model-cache", expected, create=True)


PROBLEMS: list[tuple[str, dict[str, str] | None, str | None, OperatorConfig, str, list[str]]] = [
    # (case, annotations, model size, config, the field named, words of the message)
    (
        "a model above the maximum",
        None,
        "12.0 GiB",
        PER_SERVICE,
        "model.status.size",
        ["12.0 GiB", "10Gi", "--max-service-cache-size"],
    ),
    (
        "an annotation above the maximum",
        {CACHE_SIZE_ANNOTATION: "11Gi"},
        "1.5 GiB",
        PER_SERVICE,
        ANNOTATION_FIELD,
        ["11Gi", "10Gi", "--max-service-cache-size"],
    ),
    (
        "an annotation that is no quantity",
        {CACHE_SIZE_ANNOTATION: "big"},
        "1.5 GiB",
        PER_SERVICE,
        ANNOTATION_FIELD,
        ['"big"', "not a quantity"],
    ),
    (
        "an annotation of zero",
        {CACHE_SIZE_ANNOTATION: "0"},
        "1.5 GiB",
        PER_SERVICE,
        ANNOTATION_FIELD,
        ["more than zero"],
    ),
    (
        "an annotation below the model",
        {CACHE_SIZE_ANNOTATION: "1Gi"},
        "1.5 GiB",
        PER_SERVICE,
        ANNOTATION_FIELD,
        ["1.5 GiB", "1Gi", "demo-model-cache"],
    ),
    (
        "the operator's size below the model",
        None,
        "3.0 GiB",
        replace(PER_SERVICE, service_cache_size="2Gi"),
        "operator --model-storage=per-service",
        ["3.0 GiB", "2Gi", "--service-cache-size"],
    ),
]


@pytest.mark.parametrize(
    ("annotations", "size", "config", "field", "words"),
    [case[1:] for case in PROBLEMS],
    ids=[case[0] for case in PROBLEMS],
)
def test_what_fails_the_service(
    annotations: dict[str, str] | None, size: str | None, config: OperatorConfig, field: str, words: list[str]
) -> None:
    planned = plan_service_cache(service(annotations=annotations), model(size), config, None)
    assert isinstance(planned, CacheProblem), planned
    assert planned.field == field
    for word in words:
        assert word in planned.message, (word, planned.message)


# -- an existing claim is never changed --------------------------------------------------------

EXISTING: list[tuple[str, dict[str, str] | None, str, str, list[str]]] = [
    # (case, annotations, the live claim's size, the model's size, reasons of the warnings)
    ("the same size: nothing to say", None, "2Gi", "1.5 GiB", []),
    ("the same size written otherwise", None, "2048Mi", "1.5 GiB", []),
    ("a larger size asked for", {CACHE_SIZE_ANNOTATION: "5Gi"}, "2Gi", "1.5 GiB", [CACHE_NOT_RESIZED]),
    ("a smaller size asked for", {CACHE_SIZE_ANNOTATION: "2Gi"}, "5Gi", "1.5 GiB", [CACHE_NOT_RESIZED]),
]


@pytest.mark.parametrize(
    ("annotations", "live", "size", "reasons"),
    [case[1:] for case in EXISTING],
    ids=[case[0] for case in EXISTING],
)
def test_an_existing_claim_is_kept_as_it_is(
    annotations: dict[str, str] | None, live: str, size: str, reasons: list[str]
) -> None:
    planned = plan_service_cache(service(annotations=annotations), model(size), PER_SERVICE, claim(live))
    assert isinstance(planned, ServiceCache)
    assert not planned.create and planned.size == live
    assert [w.reason for w in planned.warnings] == reasons


def test_the_not_resized_warning_names_both_sizes_and_the_claim() -> None:
    annotated = service(annotations={CACHE_SIZE_ANNOTATION: "5Gi"})
    planned = plan_service_cache(annotated, model(), PER_SERVICE, claim("2Gi"))
    assert isinstance(planned, ServiceCache)
    (warning,) = planned.warnings
    assert warning.field == ANNOTATION_FIELD
    for word in ("5Gi", "2Gi", "demo-model-cache", "never resizes"):
        assert word in warning.message


def test_a_model_that_outgrew_the_claim_fails_the_service() -> None:
    planned = plan_service_cache(service(), model("3.0 GiB"), PER_SERVICE, claim("2Gi"))
    assert isinstance(planned, CacheProblem)
    assert planned.field == "model.status.size"
    assert "3.0 GiB" in planned.message and "2Gi" in planned.message and "delete it" in planned.message


# -- more than one replica ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"replicas": 2}, "spec.replicas"),
        ({"replicas": 1, "autoscaling": {"maxReplicas": 3}}, "spec.autoscaling.maxReplicas"),
    ],
)
def test_more_than_one_replica_is_warned_not_refused(spec: dict[str, Any], field: str) -> None:
    planned = plan_service_cache(service(**spec), model(), PER_SERVICE, None)
    assert isinstance(planned, ServiceCache) and planned.create
    (warning,) = planned.warnings
    assert (warning.field, warning.reason) == (field, CACHE_NOT_SHARED)
    assert "ReadWriteOnce" in warning.message and "--model-storage=ephemeral" in warning.message


@pytest.mark.parametrize("spec", [{}, {"replicas": 1}, {"replicas": 0}, {"autoscaling": {"maxReplicas": 1}}])
def test_one_replica_at_most_is_not_warned(spec: dict[str, Any]) -> None:
    planned = plan_service_cache(service(**spec), model(), PER_SERVICE, None)
    assert isinstance(planned, ServiceCache) and planned.warnings == ()


# -- the claim itself --------------------------------------------------------------------------


def test_the_claim_is_owned_by_the_service_read_write_once_on_the_cache_storage_class() -> None:
    config = replace(PER_SERVICE, model_cache_storage_class="fast", model_cache_access_mode="ReadWriteMany")
    intent = service_cache_intent(service(), ServiceCache("demo-model-cache", "2Gi", create=True), config)
    assert intent["metadata"]["name"] == "demo-model-cache" and intent["metadata"]["namespace"] == "ai"
    (owner,) = intent["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "InferenceService",
        "demo",
        UID,
        True,
    )
    assert intent["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "llmkube",
        "app.kubernetes.io/component": "service-model-cache",
        "inference.llmkube.dev/service": "demo",
    }
    assert intent["spec"] == {
        "accessModes": ["ReadWriteOnce"],  # whatever the namespace cache's access mode
        "resources": {"requests": {"storage": "2Gi"}},
        "storageClassName": "fast",
    }


# -- storage and the planner -------------------------------------------------------------------


def storage(config: OperatorConfig, source: str = "https://host/x.gguf", name: str = "demo") -> ModelStorage:
    isvc = service(name)
    result = plan_storage(
        namespace="ai",
        spec=isvc.spec,
        model=model(source=source),
        config=config,
        needs_model_init=True,
        service=name,
    )
    assert isinstance(result, ModelStorage), result
    return result


@pytest.mark.parametrize(
    ("mode", "source", "expected_mode", "claim_name"),
    [
        ("per-service", "https://host/x.gguf", "service", "demo-model-cache"),
        ("per-service", "hf://org/repo/x.gguf", "service", "demo-model-cache"),
        ("per-service", "s3://bucket/x.gguf", "service", "demo-model-cache"),
        ("namespace", "https://host/x.gguf", "cache", "llmkube-model-cache"),
    ],
)
def test_remote_sources_mount_the_services_own_claim(
    mode: Any, source: str, expected_mode: str, claim_name: str
) -> None:
    result = storage(replace(PER_SERVICE, model_storage=mode), source)
    assert result.mode == expected_mode
    assert result.volumes[0] == {"name": "model-cache", "persistentVolumeClaim": {"claimName": claim_name}}
    assert result.model_path.startswith(f"/models/{KEY}/")  # the namespace cache's layout
    assert result.uses_service_cache == (expected_mode == "service")
    assert result.uses_cache_pvc == (expected_mode == "cache")


def plan(isvc: InferenceService, config: OperatorConfig = PER_SERVICE, **observed: Any) -> Any:
    return plan_inference_service(isvc, model(), ObservedState(now=NOW, **observed), config)


def test_the_planner_creates_the_claim_once_and_no_namespace_claim() -> None:
    first = plan(service())
    assert first.cache_pvc is None
    assert first.service_cache is not None and first.service_cache["metadata"]["name"] == "demo-model-cache"
    volumes = first.deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "model-cache", "persistentVolumeClaim": {"claimName": "demo-model-cache"}} in volumes
    again = plan(service(), service_cache_claim=claim("2Gi"))
    assert again.service_cache is None  # exists: never applied again
    assert again.deployment == first.deployment


def test_switching_modes_replans_the_deployments_volume() -> None:
    namespace = plan(service(), OperatorConfig())
    per_service = plan(service())
    claims = [
        [
            v["persistentVolumeClaim"]["claimName"]
            for v in p.deployment["spec"]["template"]["spec"]["volumes"]
            if "persistentVolumeClaim" in v
        ]
        for p in (namespace, per_service)
    ]
    assert claims == [["llmkube-model-cache"], ["demo-model-cache"]]
    assert namespace.cache_pvc is not None and namespace.service_cache is None


def test_a_changed_annotation_is_reported_in_spec_valid_and_an_event() -> None:
    annotated = service(annotations={CACHE_SIZE_ANNOTATION: "5Gi"})
    result = plan(annotated, service_cache_claim=claim("2Gi"))
    assert result.status.phase != "Failed" and result.deployment is not None and result.service_cache is None
    spec_valid = next(c for c in result.status.conditions if c.type == "SpecValid")
    assert spec_valid.status == "False" and "never resizes" in spec_valid.message
    assert [e.reason for e in result.events if "never resizes" in e.message] == [CACHE_NOT_RESIZED]


def test_a_model_above_the_maximum_fails_the_service_and_applies_nothing() -> None:
    result = plan_inference_service(service(), model("12.0 GiB"), ObservedState(now=NOW), PER_SERVICE)
    assert result.status.phase == "Failed"
    messages = [c.message for c in result.status.conditions or () if c.status == "False"]
    assert any("12.0 GiB" in m and "10Gi" in m for m in messages), messages
    assert result.deployment is None and result.service_cache is None


def test_a_claim_of_that_name_controlled_by_another_service_is_never_taken_over() -> None:
    foreign = claim("2Gi")
    foreign["metadata"]["ownerReferences"][0]["uid"] = "another"
    result = plan(service(), service_cache_claim=foreign)
    assert result.status.phase == "Failed" and result.deployment is None and result.service_cache is None
