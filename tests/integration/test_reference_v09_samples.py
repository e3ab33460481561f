"""The reference v0.9.19's samples that use the v0.9 fields (tests/reference_samples/), and a manifest
per v0.9 field in the reference's spelling, apply unchanged on a real API server with our CRDs:
accepted, and stored with every field they set (nothing pruned). What v0.9's own schema refuses,
ours refuses too (its CEL rules)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from llmkube.api.crds import all_crds
from llmkube.testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube.testing.rest import KubeRest, RestError

SAMPLES = Path(__file__).resolve().parents[1] / "reference_samples"
API = "inference.llmkube.dev/v1alpha1"
NAMESPACE = "v09-manifests"

FIELDS: dict[str, dict[str, Any]] = {
    "mode": {"mode": "embedding"},
    "suspend": {"suspend": True},
    "revisionHistoryLimit": {"revisionHistoryLimit": 2},
    "topologySpreadConstraints": {
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "x"}},
                "matchLabelKeys": ["pod-template-hash"],
            }
        ]
    },
    "affinity": {
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "x"}}}
                ]
            }
        }
    },
    "speculativeDecoding": {
        "speculativeDecoding": {"type": "draft", "draftModelRef": "d", "nDraftMax": 3, "pMin": 0.6}
    },
    "oMLX": {
        "turboQuantBits": 3,
        "pagedSSDCacheDir": "/ssd",
        "hotCacheMaxSize": "10GB",
        "pagedSSDCacheMaxSize": "50GB",
    },
    "extraVolumes": {
        "extraVolumes": [{"name": "jit", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}],
        "extraVolumeMounts": [{"name": "jit", "mountPath": "/jit", "readOnly": False}],
    },
    "bindAddress": {"bindAddress": "::"},
    "modelCache": {"modelCache": {"claimName": "weights"}},
    "sglang": {
        "runtime": "sglang",
        "sglangConfig": {
            "tensorParallelSize": 2,
            "memFractionStatic": 0.85,
            "kvCacheDtype": "fp8_e4m3",
            "speculative": {
                "enabled": True,
                "algorithm": "EAGLE3",
                "draftModelPath": "/d",
                "numDraftTokens": 4,
            },
            "loraAdapters": [{"name": "a", "path": "/a"}],
        },
    },
    "llamacpp-router": {"runtime": "llamacpp-router"},
    "disruption": {"disruption": {"protectStartup": True, "protectAlways": False}},
    "rolloutPolicy": {"rolloutPolicy": {"waitForIdle": True, "idleTimeoutSeconds": 120, "force": False}},
    "slo": {"slo": {"objective": "99.5", "window": "7d", "indicator": "latency", "latencyThreshold": "2"}},
    "maxPodLifetimeSeconds": {"maxPodLifetimeSeconds": 86400, "maxPodLifetimeIdleTimeoutSeconds": 600},
    "nodePort": {
        "endpoint": {"type": "NodePort", "nodePort": 30080, "port": 8080, "path": "/v1/chat/completions"}
    },
    "gateway": {"endpoint": {"gateway": {"enabled": True, "gatewayRef": {"name": "gw", "namespace": "gw"}}}},
    "ephemeralStorage": {
        "resources": {"ephemeralStorage": "40Gi", "gpuSharing": {"mode": "shared", "memoryLimitGiB": 8}}
    },
}
MODEL_FIELDS: dict[str, dict[str, Any]] = {
    "resourceName": {"gpu": {"count": 1, "resourceName": "amd.com/gpu", "tolerationKey": "amd.com/gpu"}},
    "runtime": {"gpu": {"count": 1, "vendor": "amd", "runtime": "vulkan"}},
    "resourceClaims": {
        "gpu": {"count": 1, "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}
    },
}
REFUSED: dict[str, tuple[str, dict[str, Any]]] = {
    "draft without weights": ("InferenceService", {"speculativeDecoding": {"type": "draft-simple"}}),
    "both draft weights": (
        "InferenceService",
        {"speculativeDecoding": {"type": "draft", "draftModelRef": "a", "draftModel": "b.gguf"}},
    ),
    "weights for ngram": (
        "InferenceService",
        {"speculativeDecoding": {"type": "ngram-simple", "draftModelRef": "a"}},
    ),
    "ephemeral with a claim": (
        "InferenceService",
        {"modelCache": {"persistence": "Ephemeral", "claimName": "c"}},
    ),
    "node port out of range": ("InferenceService", {"endpoint": {"type": "NodePort", "nodePort": 8080}}),
    "turbo bits": ("InferenceService", {"turboQuantBits": 4}),
    "partitioned without profile": (
        "InferenceService",
        {"resources": {"gpuSharing": {"mode": "partitioned"}}},
    ),
    "a bad quantity": ("InferenceService", {"resources": {"ephemeralStorage": "lots"}}),
    "an unknown runtime": ("InferenceService", {"runtime": "omlx"}),
    "claims and a resource name": (
        "Model",
        {"gpu": {"resourceName": "amd.com/gpu", "resourceClaims": [{"name": "g", "resourceClaimName": "c"}]}},
    ),
    "a claim with both names": (
        "Model",
        {
            "gpu": {
                "resourceClaims": [{"name": "g", "resourceClaimName": "c", "resourceClaimTemplateName": "t"}]
            }
        },
    ),
}


@pytest.fixture(scope="module")
def admin(api_cluster: ClusterHandle) -> KubeRest:
    apply_manifests(api_cluster, all_crds())
    client = api_cluster.admin()
    for namespace in (NAMESPACE, "default"):
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    return client


def dry_run(client: KubeRest, doc: dict[str, Any], namespace: str) -> dict[str, Any]:
    path = client.path_for(doc["apiVersion"], doc["kind"], namespace)
    stored: dict[str, Any] = client.request("POST", path, doc, query={"dryRun": "All"})
    return stored


def contains(stored: Any, sent: Any) -> bool:
    """Everything sent is stored as sent (the server may add defaults, never drop a field)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and contains(stored[k], v) for k, v in sent.items()
        )
    if isinstance(sent, list):
        return isinstance(stored, list) and len(stored) == len(sent) and all(map(contains, stored, sent))
    return bool(stored == sent)


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.yaml")))
def test_a_reference_sample_applies_unchanged(admin: KubeRest, sample: str) -> None:
    for doc in yaml.safe_load_all((SAMPLES / sample).read_text()):
        if not doc:
            continue
        stored = dry_run(admin, doc, doc["metadata"].get("namespace", NAMESPACE))
        assert contains(stored["spec"], doc["spec"]), (sample, doc["kind"])


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_manifest_with_the_v09_field_applies_unchanged(admin: KubeRest, field: str) -> None:
    doc = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": "f"},
        "spec": {"modelRef": "m", **FIELDS[field]},
    }
    stored = dry_run(admin, doc, NAMESPACE)
    assert contains(stored["spec"], doc["spec"]), stored["spec"]


@pytest.mark.parametrize("field", sorted(MODEL_FIELDS))
def test_a_model_with_the_v09_gpu_field_applies_unchanged(admin: KubeRest, field: str) -> None:
    spec = {"source": "https://example.com/m.gguf", "hardware": MODEL_FIELDS[field]}
    doc = {"apiVersion": API, "kind": "Model", "metadata": {"name": "m"}, "spec": spec}
    stored = dry_run(admin, doc, NAMESPACE)
    assert contains(stored["spec"], spec), stored["spec"]


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_what_the_reference_schema_refuses_is_refused(admin: KubeRest, case: str) -> None:
    kind, spec = REFUSED[case]
    base: dict[str, Any] = (
        {"modelRef": "m"} if kind == "InferenceService" else {"source": "https://e.x/m.gguf"}
    )
    body = {**base, **spec} if kind == "InferenceService" else {**base, "hardware": spec}
    doc = {"apiVersion": API, "kind": kind, "metadata": {"name": "r"}, "spec": body}
    with pytest.raises(RestError) as refused:
        dry_run(admin, doc, NAMESPACE)
    assert refused.value.status == 422, refused.value
