"""Hostile input the schema refuses: each case is rejected by the API server (422 Invalid, as a
server-side dry run, so nothing is stored) with a cause naming the field, before any controller
could see it. The semantically bad input the schema accepts is tests/e2e/test_semantic_corpus.py."""

from __future__ import annotations

import contextlib
import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import RestError

from llmkube.api.crds import all_crds

API = "inference.llmkube.dev/v1alpha1"

VALID_ISVC: dict[str, Any] = {"modelRef": "m"}
VALID_MODEL: dict[str, Any] = {"source": "org/model"}

#: (case, kind, spec changes (None deletes the key), the field the API server must name)
CASES: list[tuple[str, str, dict[str, Any], str]] = [
    ("missing modelRef", "InferenceService", {"modelRef": None}, "spec.modelRef"),
    ("modelRef not a string", "InferenceService", {"modelRef": 7}, "spec.modelRef"),
    ("negative replicas", "InferenceService", {"replicas": -1}, "spec.replicas"),
    ("too many replicas", "InferenceService", {"replicas": 11}, "spec.replicas"),
    ("replicas as text", "InferenceService", {"replicas": "two"}, "spec.replicas"),
    ("unknown runtime", "InferenceService", {"runtime": "ollama"}, "spec.runtime"),
    ("unknown priority", "InferenceService", {"priority": "urgent"}, "spec.priority"),
    ("context too small", "InferenceService", {"contextSize": 64}, "spec.contextSize"),
    ("context too large", "InferenceService", {"contextSize": 4194304}, "spec.contextSize"),
    ("batch size zero", "InferenceService", {"batchSize": 0}, "spec.batchSize"),
    ("micro-batch zero", "InferenceService", {"uBatchSize": 0}, "spec.uBatchSize"),
    ("parallel slots 65", "InferenceService", {"parallelSlots": 65}, "spec.parallelSlots"),
    ("container port 0", "InferenceService", {"containerPort": 0}, "spec.containerPort"),
    ("endpoint port 70000", "InferenceService", {"endpoint": {"port": 70000}}, "spec.endpoint.port"),
    ("endpoint type", "InferenceService", {"endpoint": {"type": "Ingress"}}, "spec.endpoint.type"),
    ("nine GPUs", "InferenceService", {"resources": {"gpu": 9}}, "spec.resources.gpu"),
    ("GPU count as text", "InferenceService", {"resources": {"gpu": "one"}}, "spec.resources.gpu"),
    ("cpu as a number", "InferenceService", {"resources": {"cpu": 2}}, "spec.resources.cpu"),
    (
        "autoscaling without max",
        "InferenceService",
        {"autoscaling": {"minReplicas": 1}},
        "spec.autoscaling.maxReplicas",
    ),
    (
        "autoscaling max 0",
        "InferenceService",
        {"autoscaling": {"maxReplicas": 0}},
        "spec.autoscaling.maxReplicas",
    ),
    (
        "autoscaling max 101",
        "InferenceService",
        {"autoscaling": {"maxReplicas": 101}},
        "spec.autoscaling.maxReplicas",
    ),
    (
        "autoscaling min 11",
        "InferenceService",
        {"autoscaling": {"maxReplicas": 20, "minReplicas": 11}},
        "spec.autoscaling.minReplicas",
    ),
    (
        "metric type",
        "InferenceService",
        {"autoscaling": {"maxReplicas": 2, "metrics": [{"type": "External", "name": "x"}]}},
        "spec.autoscaling.metrics[0].type",
    ),
    ("cache type K", "InferenceService", {"cacheTypeK": "q2_k"}, "spec.cacheTypeK"),
    ("cache type V", "InferenceService", {"cacheTypeV": "fp8"}, "spec.cacheTypeV"),
    (
        "rope scaling without type",
        "InferenceService",
        {"ropeScaling": {"factor": "2"}},
        "spec.ropeScaling.type",
    ),
    (
        "rope factor not a number",
        "InferenceService",
        {"ropeScaling": {"type": "yarn", "factor": "x2"}},
        "spec.ropeScaling.factor",
    ),
    (
        "rope original context 64",
        "InferenceService",
        {"ropeScaling": {"type": "yarn", "originalContext": 64}},
        "spec.ropeScaling.originalContext",
    ),
    ("negative MoE CPU layers", "InferenceService", {"moeCPULayers": -1}, "spec.moeCPULayers"),
    ("negative reasoning budget", "InferenceService", {"reasoningBudget": -5}, "spec.reasoningBudget"),
    (
        "vLLM memory utilisation 1.5",
        "InferenceService",
        {"vllmConfig": {"gpuMemoryUtilization": 1.5}},
        "spec.vllmConfig.gpuMemoryUtilization",
    ),
    ("vLLM dtype", "InferenceService", {"vllmConfig": {"dtype": "int8"}}, "spec.vllmConfig.dtype"),
    (
        "vLLM quantization",
        "InferenceService",
        {"vllmConfig": {"quantization": "q4"}},
        "spec.vllmConfig.quantization",
    ),
    (
        "vLLM batched tokens 100",
        "InferenceService",
        {"vllmConfig": {"maxNumBatchedTokens": 100}},
        "spec.vllmConfig.maxNumBatchedTokens",
    ),
    (
        "speculative tokens 17",
        "InferenceService",
        {"vllmConfig": {"speculative": {"enabled": True, "numSpeculativeTokens": 17}}},
        "spec.vllmConfig.speculative.numSpeculativeTokens",
    ),
    ("TGI quantize", "InferenceService", {"tgiConfig": {"quantize": "q8"}}, "spec.tgiConfig.quantize"),
    (
        "TGI token secret without key",
        "InferenceService",
        {"tgiConfig": {"hfTokenSecretRef": {"name": "s"}}},
        "spec.tgiConfig.hfTokenSecretRef.key",
    ),
    (
        "seccomp without type",
        "InferenceService",
        {"securityContext": {"seccompProfile": {}}},
        "spec.securityContext.seccompProfile.type",
    ),
    (
        "probe httpGet without port",
        "InferenceService",
        {"probeOverrides": {"liveness": {"httpGet": {"path": "/"}}}},
        "spec.probeOverrides.liveness.httpGet.port",
    ),
    (
        "env from a field without its path",
        "InferenceService",
        {"env": [{"name": "X", "valueFrom": {"fieldRef": {}}}]},
        "spec.env[0].valueFrom.fieldRef.fieldPath",
    ),
    ("args not a list", "InferenceService", {"args": "--verbose"}, "spec.args"),
    ("model without source", "Model", {"source": None}, "spec.source"),
    ("model source with spaces", "Model", {"source": "my model.gguf"}, "spec.source"),
    # s3://, gs:// and hf:// are sources; ftp:// is not
    ("model source scheme", "Model", {"source": "ftp://bucket/m.gguf"}, "spec.source"),
    ("sha256 too short", "Model", {"sha256": "abc123"}, "spec.sha256"),
    ("refresh policy", "Model", {"refreshPolicy": "Always"}, "spec.refreshPolicy"),
    ("format", "Model", {"format": "onnx"}, "spec.format"),
    ("accelerator", "Model", {"hardware": {"accelerator": "tpu"}}, "spec.hardware.accelerator"),
    ("GPU vendor", "Model", {"hardware": {"gpu": {"vendor": "apple"}}}, "spec.hardware.gpu.vendor"),
    ("GPU layers -2", "Model", {"hardware": {"gpu": {"layers": -2}}}, "spec.hardware.gpu.layers"),
    ("memory fraction 2", "Model", {"hardware": {"memoryFraction": 2}}, "spec.hardware.memoryFraction"),
]


def body(kind: str, changes: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(VALID_ISVC if kind == "InferenceService" else VALID_MODEL)
    for key, value in changes.items():
        if value is None:
            spec.pop(key, None)
        else:
            spec[key] = value
    return {"apiVersion": API, "kind": kind, "metadata": {"name": "hostile"}, "spec": spec}


@pytest.fixture(scope="module")
def namespace(api_cluster: ClusterHandle) -> Iterator[str]:
    """One namespace for the whole corpus (dry runs store nothing), with the CRDs installed."""
    apply_manifests(api_cluster, list(all_crds()))
    name = f"schema-corpus-{uuid.uuid4().hex[:6]}"
    admin = api_cluster.admin()
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    with contextlib.suppress(RestError):
        admin.delete("v1", "Namespace", name)


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 30
    assert len({case for case, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize("kind", ["InferenceService", "Model"])
def test_the_valid_base_is_accepted(api_cluster: ClusterHandle, namespace: str, kind: str) -> None:
    admin = api_cluster.admin()
    path = admin.path_for(API, kind, namespace)
    admin.request("POST", path, body(kind, {}), query={"dryRun": "All"})


@pytest.mark.parametrize(("case", "kind", "changes", "field"), CASES, ids=[case for case, *_ in CASES])
def test_rejected_with_the_field_named(
    api_cluster: ClusterHandle,
    namespace: str,
    case: str,
    kind: str,
    changes: dict[str, Any],
    field: str,
) -> None:
    admin = api_cluster.admin()
    path = admin.path_for(API, kind, namespace)
    with pytest.raises(RestError) as rejected:
        admin.request("POST", path, body(kind, changes), query={"dryRun": "All"})
    error = rejected.value
    assert error.status == 422, error
    assert isinstance(error.body, dict) and error.body.get("reason") == "Invalid"
    causes = (error.body.get("details") or {}).get("causes") or []
    assert field in [cause.get("field") for cause in causes], causes
    assert field in error.body["message"]
