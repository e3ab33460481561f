"""Model storage: the three modes, the init container, the CA bundle."""

from typing import Any

import pytest
from isvc_factories import CACHE_KEY, make_model

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.storage import NO_STORAGE, ModelStorage, StorageProblem, plan_storage
from llmkube.plan.model.download_scripts import CA_BUNDLE_PRELUDE, DOWNLOAD_REMOTE, LOCAL_COPY


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
        "DOWNLOAD_KIND": "http",
        "MODEL_SOURCE": "https://host/x.gguf",
        "CACHE_DIR": f"/models/{CACHE_KEY}",
        "MODEL_FILES": "tiny.gguf\thttps://host/x.gguf",
    }
    assert "envFrom" not in init and result.mmproj_path == ""


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
    assert env(result)["CACHE_DIR"] == "/models"
    assert env(result)["MODEL_FILES"] == "ai-tiny.gguf\thttps://host/x.gguf"


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
    assert init["command"][2] == CA_BUNDLE_PRELUDE + DOWNLOAD_REMOTE


def test_ca_bundle_in_empty_dir_mode() -> None:
    result = ok(storage(make_model(cache_key=""), config=OperatorConfig(ca_cert_configmap="corp-ca")))
    assert result.init_containers[0]["command"][2].startswith(CA_BUNDLE_PRELUDE)


@pytest.mark.parametrize(("policy", "on_change"), [(None, None), ("IfNotPresent", None), ("OnChange", "1")])
def test_refresh_policy_is_told_to_the_downloader(policy: str | None, on_change: str | None) -> None:
    result = ok(storage(make_model(refresh_policy=policy)))
    assert result.init_containers[0]["command"][2] == DOWNLOAD_REMOTE
    assert env(result).get("ON_CHANGE") == on_change


def test_sha256_of_the_model_file_is_told_to_the_downloader() -> None:
    result = ok(storage(make_model(sha256="AB" * 32)))
    assert env(result)["MODEL_SHA256"] == "ab" * 32


HF = "https://hub.example"


@pytest.mark.parametrize(
    ("source", "files", "mmproj", "kind", "expected_files", "model_file", "projector"),
    [
        (
            "hf://org/Repo-GGUF@v1.0",
            ["Q4/m-00001-of-00002.gguf", "Q4/m-00002-of-00002.gguf"],
            "mmproj-f16.gguf",
            "hf",
            [
                f"Q4/m-00001-of-00002.gguf\t{HF}/org/Repo-GGUF/resolve/v1.0/Q4/m-00001-of-00002.gguf",
                f"Q4/m-00002-of-00002.gguf\t{HF}/org/Repo-GGUF/resolve/v1.0/Q4/m-00002-of-00002.gguf",
                f"mmproj-f16.gguf\t{HF}/org/Repo-GGUF/resolve/v1.0/mmproj-f16.gguf",
            ],
            "Q4/m-00001-of-00002.gguf",
            "mmproj-f16.gguf",
        ),
        (  # a bare repo id with files is the same repository, at main
            "org/Repo-GGUF",
            ["m.gguf"],
            None,
            "hf",
            [f"m.gguf\t{HF}/org/Repo-GGUF/resolve/main/m.gguf"],
            "m.gguf",
            None,
        ),
        (  # a revision is one path segment of the URL
            "hf://org/repo@refs/pr/1",
            ["m.gguf"],
            None,
            "hf",
            [f"m.gguf\t{HF}/org/repo/resolve/refs%2Fpr%2F1/m.gguf"],
            "m.gguf",
            None,
        ),
        (
            "s3://models/org/Repo",
            ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"],
            None,
            "s3",
            [
                "m-00001-of-00002.gguf\t/models/org/Repo/m-00001-of-00002.gguf",
                "m-00002-of-00002.gguf\t/models/org/Repo/m-00002-of-00002.gguf",
            ],
            "m-00001-of-00002.gguf",
            None,
        ),
        (
            "s3://models/llama+3.gguf",
            None,
            None,
            "s3",
            ["tiny.gguf\t/models/llama%2B3.gguf"],
            "tiny.gguf",
            None,
        ),
        (
            "https://mirror/dir/",
            ["a b.gguf"],
            None,
            "http",
            ["a b.gguf\thttps://mirror/dir/a%20b.gguf"],
            "a b.gguf",
            None,
        ),
    ],
)
def test_remote_sources_stage_their_files_in_the_models_cache_directory(
    source: str,
    files: list[str] | None,
    mmproj: str | None,
    kind: str,
    expected_files: list[str],
    model_file: str,
    projector: str | None,
) -> None:
    fields = {k: v for k, v in {"files": files, "mmproj": mmproj}.items() if v is not None}
    result = ok(storage(make_model(source, **fields), config=OperatorConfig(hf_endpoint=HF)))
    values = env(result)
    assert values["DOWNLOAD_KIND"] == kind and values["MODEL_SOURCE"] == source
    assert values["MODEL_FILES"].split("\n") == expected_files
    assert result.model_path == f"/models/{CACHE_KEY}/{model_file}"
    assert result.mmproj_path == (f"/models/{CACHE_KEY}/{projector}" if projector else "")
    assert ("HF_ENDPOINT" in values) is (kind == "hf")


def test_the_models_secret_goes_to_the_downloader_alone() -> None:
    model = make_model("s3://models/m.gguf", sourceSecretRef={"name": "s3-creds"})
    result = ok(storage(model))
    (init,) = result.init_containers
    assert init["envFrom"] == [{"secretRef": {"name": "s3-creds"}}]
    # Our variables are `env`, which wins over envFrom: no key of the Secret changes what is fetched.
    assert {"DOWNLOAD_KIND", "MODEL_FILES", "CACHE_DIR", "MODEL_SOURCE"} <= set(env(result))


def test_pvc_source_with_files_loads_the_first_from_the_claims_directory() -> None:
    model = make_model(
        "pvc://weights/llama", files=["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"], mmproj="p.gguf"
    )
    result = ok(storage(model))
    assert result.model_path == "/model-source/llama/m-00001-of-00002.gguf"
    assert result.mmproj_path == "/model-source/llama/p.gguf"
    assert result.init_containers == ()


@pytest.mark.parametrize(
    ("source", "fields", "field"),
    [
        ("hf://org/repo", {"files": ["../../etc/passwd"]}, "model.spec.files[0]"),
        ("s3://models/x", {"files": ["a.gguf"], "mmproj": "/abs"}, "model.spec.mmproj"),
        ("pvc://weights/d", {"files": ["*.gguf"]}, "model.spec.files[0]"),
    ],
)
def test_unusable_files_are_a_problem_never_a_path(source: str, fields: dict[str, Any], field: str) -> None:
    result = storage(make_model(source, **fields))
    assert isinstance(result, StorageProblem) and result.field == field


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
    # The remote script is byte-for-byte the same whatever the source: only env vars carry values.
    assert {s for s in scripts if s != LOCAL_COPY} == {DOWNLOAD_REMOTE}


EPHEMERAL = OperatorConfig(model_storage="ephemeral", ephemeral_cache_size_limit="2Gi")


@pytest.mark.parametrize(
    "source",
    ["https://host/x.gguf", "hf://org/repo/x.gguf", "s3://bucket/x.gguf"],
    ids=["http", "hf", "s3"],
)
def test_ephemeral_storage_downloads_remote_sources_into_a_bounded_emptydir(source: str) -> None:
    result = ok(storage(make_model(source), config=EPHEMERAL))
    assert result.mode == "emptydir" and not result.uses_cache_pvc
    assert result.volumes[0] == {"name": "model-storage", "emptyDir": {"sizeLimit": "2Gi"}}
    assert result.model_path == "/models/ai-tiny.gguf"
    (init,) = result.init_containers
    assert init["volumeMounts"] == [{"name": "model-storage", "mountPath": "/models"}]
    assert result.mounts == ({"name": "model-storage", "mountPath": "/models", "readOnly": True},)


@pytest.mark.parametrize(
    ("source", "mode"),
    [("pvc://weights/x.gguf", "pvc"), ("/data/models/x.gguf", "cache")],
    ids=["pvc-source", "local-source"],
)
def test_ephemeral_storage_leaves_claims_and_local_copies_as_they_are(source: str, mode: str) -> None:
    # A pvc:// Model is already on a claim; a local file is copied through the namespace cache.
    assert ok(storage(make_model(source), config=EPHEMERAL)).mode == mode


@pytest.mark.parametrize(
    ("size", "refused"),
    [
        (None, False),  # not measured yet
        ("0", False),  # a size the controller never saw
        ("512 B", False),
        ("2.0 GiB", False),  # exactly the limit fits
        ("2.1 GiB", True),
        ("4.6 GiB", True),
        ("1.0 TiB", True),
    ],
)
def test_a_model_larger_than_the_ephemeral_limit_is_refused(size: str | None, refused: bool) -> None:
    model = make_model(status={"size": size} if size is not None else None)
    result = storage(model, config=EPHEMERAL)
    if not refused:
        assert ok(result).mode == "emptydir"
        return
    assert isinstance(result, StorageProblem)
    assert result.field == "model.status.size"
    assert f"the model is {size}, more than the ephemeral cache holds (2Gi" in result.message
    # The same model in the namespace cache is fine: the claim's size is the admin's.
    assert ok(storage(model)).mode == "cache"
