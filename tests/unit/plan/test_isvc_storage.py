"""Model storage: the three modes, the init container, the CA bundle."""

from typing import Any

import pytest
from isvc_factories import CACHE_KEY, make_model

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.init_scripts import (
    CA_BUNDLE_PRELUDE,
    DOWNLOAD_IF_MISSING,
    DOWNLOAD_ON_CHANGE,
    LOCAL_COPY,
)
from llmkube.plan.inferenceservice.storage import NO_STORAGE, ModelStorage, StorageProblem, plan_storage


def storage(
    model: Model | None = None,
    spec: dict[str, Any] | None = None,
    *,
    config: OperatorConfig | None = None,
    needs_model_init: bool = True,
) -> ModelStorage | StorageProblem:
    return plan_storage(
        namespace="ai",
        spec=InferenceServiceSpec.model_validate({"modelRef": "tiny", **(spec or {})}),
        model=model or make_model(),
        config=config or OperatorConfig(),
        needs_model_init=needs_model_init,
    )


def ok(result: ModelStorage | StorageProblem) -> ModelStorage:
    assert isinstance(result, ModelStorage), result
    return result


def env(result: ModelStorage) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in result.init_containers[0]["env"]}


def test_no_storage_when_the_runtime_needs_no_model_file_or_init_is_skipped() -> None:
    assert storage(needs_model_init=False) is NO_STORAGE
    assert storage(spec={"skipModelInit": True}) is NO_STORAGE
    assert NO_STORAGE.model_path == "" and not NO_STORAGE.uses_cache_pvc


def test_skip_model_init_false_still_plans_storage() -> None:
    assert ok(storage(spec={"skipModelInit": False})).mode == "cache"


def test_pvc_source_mounts_the_claim_read_only_without_init_container_or_cache_pvc() -> None:
    result = ok(storage(make_model("pvc://weights/llama/x.gguf")))
    assert result.mode == "pvc" and not result.uses_cache_pvc
    assert result.model_path == "/model-source/llama/x.gguf"
    assert result.volumes == (
        {"name": "model-source", "persistentVolumeClaim": {"claimName": "weights", "readOnly": True}},
    )
    assert result.mounts == ({"name": "model-source", "mountPath": "/model-source", "readOnly": True},)
    assert result.init_containers == ()


def test_invalid_pvc_source_is_a_problem_not_a_crash() -> None:
    result = storage(make_model("pvc://weights/"))
    assert isinstance(result, StorageProblem)
    assert result.field == "model.spec.source" and "pvc://weights/" in result.message


def test_cached_mode_for_http_source() -> None:
    result = ok(storage())
    assert result.mode == "cache" and result.uses_cache_pvc
    assert result.model_path == f"/models/{CACHE_KEY}/tiny.gguf"
    assert result.volumes == (
        {"name": "model-cache", "persistentVolumeClaim": {"claimName": "llmkube-model-cache"}},
    )
    assert result.mounts == ({"name": "model-cache", "mountPath": "/models", "readOnly": True},)
    (init,) = result.init_containers
    assert init["name"] == "model-downloader"
    assert init["image"] == "docker.io/curlimages/curl:8.18.0"
    assert init["command"][:2] == ["sh", "-c"]
    assert init["volumeMounts"] == [{"name": "model-cache", "mountPath": "/models"}]
    assert env(result) == {
        "MODEL_SOURCE": "https://host/x.gguf",
        "CACHE_DIR": f"/models/{CACHE_KEY}",
        "MODEL_PATH": f"/models/{CACHE_KEY}/tiny.gguf",
    }


@pytest.mark.parametrize(
    ("source", "status", "basename"),
    [
        ("https://host/x.gguf", {"path": "/models/abc/Llama-3.2-1B.gguf"}, "Llama-3.2-1B.gguf"),
        ("/data/x.gguf", {"gguf": {"modelName": "Llama 3.2 1B"}}, "Llama-3.2-1B.gguf"),
        ("/data/x.gguf", {"path": "", "gguf": {"modelName": "Qwen"}}, "Qwen.gguf"),
        # http(s): the header read by the Model controller never renames the download.
        ("https://host/x.gguf", {"gguf": {"modelName": "Llama 3.2 1B"}}, "tiny.gguf"),
        ("https://host/x.gguf", {}, "tiny.gguf"),
    ],
)
def test_cached_basename(source: str, status: dict[str, Any], basename: str) -> None:
    result = ok(storage(make_model(source, status=status)))
    assert result.model_path == f"/models/{CACHE_KEY}/{basename}"


def test_custom_init_image() -> None:
    result = ok(storage(config=OperatorConfig(init_container_image="registry.local/curl:1")))
    assert result.init_containers[0]["image"] == "registry.local/curl:1"


@pytest.mark.parametrize(
    ("model", "config"),
    [
        (make_model(cache_key=""), OperatorConfig()),
        (make_model(cache_key=None), OperatorConfig()),
        (make_model(), OperatorConfig(model_cache_path="")),
    ],
)
def test_empty_dir_mode_without_cache(model: Model, config: OperatorConfig) -> None:
    result = ok(storage(model, config=config))
    assert result.mode == "emptydir" and not result.uses_cache_pvc
    assert result.model_path == "/models/ai-tiny.gguf"
    assert result.volumes == ({"name": "model-storage", "emptyDir": {}},)
    assert result.mounts == ({"name": "model-storage", "mountPath": "/models", "readOnly": True},)
    assert env(result)["CACHE_DIR"] is None  # unset == "" for the script; stored without a value


@pytest.mark.parametrize("source", ["file:///data/m.gguf", "/data/m.gguf"])
def test_local_source_in_cached_mode_mounts_the_host_file(source: str) -> None:
    result = ok(storage(make_model(source)))
    assert {"name": "host-model", "hostPath": {"path": "/data/m.gguf", "type": "File"}} in result.volumes
    assert {
        "name": "host-model",
        "mountPath": "/host-model/model.gguf",
        "readOnly": True,
    } in result.init_containers[0]["volumeMounts"]
    assert result.init_containers[0]["command"][2] == LOCAL_COPY


def test_local_source_without_cache_is_a_problem() -> None:
    result = storage(make_model("/data/m.gguf", cache_key=""))
    assert isinstance(result, StorageProblem) and "/data/m.gguf" in result.message


def test_ca_bundle() -> None:
    result = ok(storage(config=OperatorConfig(ca_cert_configmap="corp-ca")))
    assert {"name": "custom-ca-cert", "configMap": {"name": "corp-ca"}} in result.volumes
    init = result.init_containers[0]
    assert {"name": "custom-ca-cert", "mountPath": "/custom-certs", "readOnly": True} in init["volumeMounts"]
    assert init["command"][2] == CA_BUNDLE_PRELUDE + DOWNLOAD_IF_MISSING


def test_ca_bundle_in_empty_dir_mode() -> None:
    result = ok(storage(make_model(cache_key=""), config=OperatorConfig(ca_cert_configmap="corp-ca")))
    assert result.init_containers[0]["command"][2].startswith(CA_BUNDLE_PRELUDE)


@pytest.mark.parametrize(
    ("policy", "script"),
    [(None, DOWNLOAD_IF_MISSING), ("IfNotPresent", DOWNLOAD_IF_MISSING), ("OnChange", DOWNLOAD_ON_CHANGE)],
)
def test_refresh_policy_selects_the_script(policy: str | None, script: str) -> None:
    assert ok(storage(make_model(refresh_policy=policy))).init_containers[0]["command"][2] == script


@pytest.mark.parametrize(
    ("pod_context", "expected_extra"),
    [
        (None, {"runAsNonRoot": True}),
        ({"runAsUser": 1000}, {"runAsNonRoot": True, "runAsUser": 1000}),
        (
            {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000},
            {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 3000},
        ),
        # A pod that asks for root gets it in the downloader too (baseline allows it).
        ({"runAsUser": 0}, {"runAsUser": 0}),
        ({"runAsNonRoot": False}, {}),
    ],
)
def test_init_container_security_context(
    pod_context: dict[str, Any] | None, expected_extra: dict[str, int]
) -> None:
    result = ok(storage(spec={"podSecurityContext": pod_context}))
    assert result.init_containers[0]["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,  # it writes only under /models (plan/inferenceservice/hardening.py)
        "capabilities": {"drop": ["ALL"]},
        **expected_extra,
    }
    # Small and capped: curl streams to disk.
    assert result.init_containers[0]["resources"] == {
        "requests": {"cpu": "100m", "memory": "64Mi"},
        "limits": {"memory": "512Mi"},
    }


HOSTILE_SOURCES = [
    "https://host/x.gguf",
    'https://host/$(touch${IFS}/tmp/pwned)";echo${IFS}"x.gguf',
    "https://host/`id`.gguf",
    "file:///data/it's.gguf",
]


@pytest.mark.parametrize("policy", [None, "OnChange"])
def test_no_user_value_is_interpolated_into_the_script(policy: str | None) -> None:
    scripts = set()
    for source in HOSTILE_SOURCES:
        model = make_model(source, refresh_policy=policy, status={"path": f"/models/k/{source[-12:]}"})
        result = ok(storage(model))
        script = result.init_containers[0]["command"][2]
        scripts.add(script)
        assert source not in script
        assert env(result)["MODEL_SOURCE"] == source
    # The remote variants are byte-for-byte the same whatever the source: only env vars carry values.
    assert len({s for s in scripts if s != LOCAL_COPY}) == 1
