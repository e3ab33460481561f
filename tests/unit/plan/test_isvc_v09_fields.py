"""The fields the reference added in v0.9, planned: what each puts in the Deployment, the Service and
the HPA, and what the status says (docs/compatibility.md lists them)."""

from datetime import timedelta
from typing import Any

import pytest
from isvc_factories import (
    CACHE_KEY,
    NOW,
    live_deployment,
    live_object,
    make_isvc,
    make_model,
    observe,
    owner_refs,
)
from isvc_planning import args, condition, container, plan, pod_spec

from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.policy import SERVICE_TYPES
from llmkube.plan.tenancy import POLICY_VIOLATION, RESTRICTED_VOLUME_TYPES, TenancyPolicy

SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"inference.llmkube.dev/service": "demo"}},
    }
]
AFFINITY = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 10,
                "preference": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]},
            }
        ]
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "podAffinityTerm": {
                    "topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"workload": "gpu"}},
                },
            }
        ]
    },
}
ALL_TYPES = OperatorConfig(tenancy=TenancyPolicy(allowed_service_types=frozenset(SERVICE_TYPES)))


def failed_fields(result: Any) -> str:
    assert result.status.phase == "Failed", result.status.phase
    assert result.deployment is None and result.service is None
    return str(condition(result, "Degraded"))


# -- placement and pod shape --------------------------------------------------------------------


def test_topology_spread_constraints_and_affinity_reach_the_pod_as_written() -> None:
    result = plan({"topologySpreadConstraints": SPREAD, "affinity": AFFINITY})
    assert pod_spec(result)["topologySpreadConstraints"] == SPREAD
    assert pod_spec(result)["affinity"] == AFFINITY
    assert result.status.phase == "Creating"


def test_extra_volumes_and_mounts_come_after_the_models() -> None:
    volumes = [{"name": "jit-cache", "emptyDir": {"sizeLimit": "2Gi"}}]
    mounts = [{"name": "jit-cache", "mountPath": "/cache/jit"}]
    result = plan({"extraVolumes": volumes, "extraVolumeMounts": mounts})
    assert [v["name"] for v in pod_spec(result)["volumes"]] == ["model-cache", "tmp", "jit-cache"]
    assert container(result)["volumeMounts"][-1] == mounts[0]
    assert pod_spec(result)["volumes"][-1] == volumes[0]


def test_an_extra_mount_of_no_volume_is_refused_naming_it() -> None:
    result = plan({"extraVolumeMounts": [{"name": "nowhere", "mountPath": "/x"}]})
    assert "spec.extraVolumeMounts[0].name" in failed_fields(result)


def test_an_extra_volume_may_not_take_a_controller_volume_name() -> None:
    result = plan({"extraVolumes": [{"name": "model-cache", "emptyDir": {}}]})
    assert "spec.extraVolumes[0].name" in failed_fields(result)


@pytest.mark.parametrize(("limit", "expected"), [(None, None), (0, 0), (3, 3)])
def test_revision_history_limit(limit: int | None, expected: int | None) -> None:
    result = plan({} if limit is None else {"revisionHistoryLimit": limit})
    assert result.deployment is not None
    assert result.deployment["spec"].get("revisionHistoryLimit") == expected


@pytest.mark.parametrize(
    ("spec", "host"),
    [
        ({}, ["--host", "0.0.0.0"]),
        ({"bindAddress": "::"}, ["--host", "::"]),
        ({"bindAddress": "::", "extraArgs": ["--host", "127.0.0.1"]}, ["--host", "127.0.0.1"]),
    ],
)
def test_bind_address_is_the_servers_host_unless_extra_args_say(
    spec: dict[str, Any], host: list[str]
) -> None:
    argv = args(plan(spec))
    assert argv.count("--host") == 1
    index = argv.index("--host")
    assert argv[index : index + 2] == host


def test_bind_address_for_vllm_tgi_and_sglang() -> None:
    for runtime, flag in (("vllm", "--host"), ("tgi", "--hostname"), ("sglang", "--host")):
        argv = args(plan({"runtime": runtime, "bindAddress": "::", "skipModelInit": True}))
        assert argv[argv.index(flag) + 1] == "::", runtime


# -- lifecycle -------------------------------------------------------------------------------------


def test_suspend_scales_to_zero_keeps_replicas_and_says_suspended() -> None:
    result = plan({"replicas": 3, "suspend": True})
    assert result.deployment is not None and result.deployment["spec"]["replicas"] == 0
    assert result.status.phase == "Suspended"
    assert result.status.desired_replicas == 0
    available = condition(result, "Available")
    assert available is not None and available[:2] == ("False", "Suspended")
    ready = condition(result, "Ready")
    assert ready is not None and ready[:2] == ("True", "Suspended")


def test_suspend_removes_the_hpa_and_resuming_restores_it() -> None:
    hpa = {
        **live_object("autoscaling/v2", "HorizontalPodAutoscaler"),
        "metadata": {"name": "demo", "namespace": "ai", "uid": "h", "ownerReferences": owner_refs()},
    }
    autoscaled = {"replicas": 2, "autoscaling": {"maxReplicas": 4}}
    suspended = plan({**autoscaled, "suspend": True}, observed=observe(hpa=hpa))
    assert suspended.hpa is None
    assert [ref.kind for ref in suspended.deletes] == ["HorizontalPodAutoscaler"]
    assert suspended.deployment is not None and suspended.deployment["spec"]["replicas"] == 0
    resumed = plan({**autoscaled, "suspend": False})
    assert resumed.hpa is not None and resumed.hpa["spec"]["maxReplicas"] == 4
    assert resumed.status.phase == "Creating"
    assert resumed.deployment is not None and "replicas" not in resumed.deployment["spec"]


def test_rollout_policy_wait_for_idle_drains_each_old_pod() -> None:
    result = plan({"rolloutPolicy": {"waitForIdle": True, "idleTimeoutSeconds": 90}})
    hook = container(result)["lifecycle"]["preStop"]["exec"]["command"]
    assert hook[3:6] == ["llmkube-drain", "8080", "90"]
    assert pod_spec(result)["terminationGracePeriodSeconds"] == 90 + 2 + 30


@pytest.mark.parametrize("policy", [{"waitForIdle": True, "force": True}, {"waitForIdle": False}, {}])
def test_rollout_policy_without_wait_or_with_force_does_not_drain(policy: dict[str, Any]) -> None:
    result = plan({"rolloutPolicy": policy})
    assert "lifecycle" not in container(result)


# -- serving ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "flags", "mode"),
    [
        ({"mode": "embedding"}, ["--embedding", "--pooling", "last", "--cache-ram", "0"], "embedding"),
        (
            {"mode": "rerank"},
            ["--reranking", "--embedding", "--pooling", "rank", "--cache-ram", "0"],
            "rerank",
        ),
        (
            {"mode": "embedding", "extraArgs": ["--pooling", "mean"]},
            ["--embedding", "--cache-ram", "0"],
            "embedding",
        ),
        ({"extraArgs": ["--embedding"]}, [], "embedding"),
        ({"endpoint": {"path": "/v1/rerank"}}, [], "rerank"),
        ({}, [], "chat"),
    ],
)
def test_mode_flags_for_llamacpp_and_the_status_mode(
    spec: dict[str, Any], flags: list[str], mode: str
) -> None:
    result = plan(spec)
    argv = args(result)
    extra = spec.get("extraArgs", [])
    # Ours come before the user's extraArgs, then --metrics.
    assert argv[len(argv) - len(extra) - 1 - len(flags) : len(argv) - len(extra) - 1] == flags
    assert result.status.mode == mode


def test_mode_for_vllm_and_sglang() -> None:
    vllm = args(plan({"runtime": "vllm", "mode": "embedding"}))
    assert vllm[-4:] == ["--runner", "pooling", "--convert", "embed"]
    sglang = args(plan({"runtime": "sglang", "mode": "embedding"}))
    assert sglang[-1] == "--is-embedding"


def test_speculative_decoding_with_a_companion_file() -> None:
    model = make_model(files=["main.gguf", "draft.gguf"])
    result = plan(
        {"speculativeDecoding": {"type": "draft", "draftModel": "draft.gguf", "nDraftMax": 3, "pMin": 0.5}},
        model,
    )
    argv = args(result)
    start = argv.index("--spec-type")
    assert argv[start : start + 8] == [
        "--spec-type",
        "draft-simple",
        "-md",
        f"/models/{CACHE_KEY}/draft.gguf",
        "--spec-draft-n-max",
        "3",
        "--spec-draft-p-min",
        "0.5",
    ]


def test_speculative_decoding_from_a_second_model_adds_its_downloader() -> None:
    draft = make_model("https://host/draft.gguf", name="tiny-draft", cache_key="fedcba9876543210")
    result = plan(
        {"speculativeDecoding": {"type": "draft-simple", "draftModelRef": "tiny-draft"}},
        observed=observe(draft_model=draft),
    )
    init = pod_spec(result)["initContainers"]
    assert [c["name"] for c in init] == ["model-downloader", "draft-model-downloader"]
    argv = args(result)
    assert argv[argv.index("-md") + 1].startswith("/models/fedcba9876543210/")
    assert [v["name"] for v in pod_spec(result)["volumes"]].count("model-cache") == 1


def test_speculative_decoding_waits_for_a_missing_draft_model_in_status() -> None:
    result = plan({"speculativeDecoding": {"type": "draft", "draftModelRef": "absent"}})
    assert "spec.speculativeDecoding.draftModelRef" in failed_fields(result)
    assert "not found" in failed_fields(result)


@pytest.mark.parametrize(("kind", "flag"), [("mtp", "draft-mtp"), ("ngram-simple", "ngram-simple")])
def test_speculative_types_without_weights(kind: str, flag: str) -> None:
    argv = args(plan({"speculativeDecoding": {"type": kind}}))
    assert argv[argv.index("--spec-type") + 1] == flag and "-md" not in argv


def test_speculative_decoding_on_vllm_and_a_runtime_without_it() -> None:
    argv = args(plan({"runtime": "vllm", "speculativeDecoding": {"type": "ngram-simple", "nDraftMax": 4}}))
    assert argv[argv.index("--speculative-config") + 1] == '{"method":"ngram","num_speculative_tokens":4}'
    refused = plan({"runtime": "vllm", "speculativeDecoding": {"type": "draft-eagle3", "draftModel": "x"}})
    assert "spec.speculativeDecoding.type" in failed_fields(refused)
    tgi = plan({"runtime": "tgi", "speculativeDecoding": {"type": "mtp"}})
    assert "spec.speculativeDecoding" in failed_fields(tgi)


def test_model_cache_claim_name_caches_in_the_users_claim() -> None:
    result = plan({"modelCache": {"claimName": "my-weights"}})
    volume = pod_spec(result)["volumes"][0]
    assert volume == {"name": "model-cache", "persistentVolumeClaim": {"claimName": "my-weights"}}
    assert result.cache_pvc is None  # the namespace's claim is neither used nor made
    assert args(result)[1].startswith(f"/models/{CACHE_KEY}/")


def test_model_cache_ephemeral_sized_by_ephemeral_storage() -> None:
    result = plan({"modelCache": {"persistence": "Ephemeral"}, "resources": {"ephemeralStorage": "40Gi"}})
    assert pod_spec(result)["volumes"][0] == {"name": "model-storage", "emptyDir": {"sizeLimit": "40Gi"}}
    assert result.cache_pvc is None
    resources = container(result)["resources"]
    assert resources["requests"]["ephemeral-storage"] == resources["limits"]["ephemeral-storage"] == "40Gi"


def test_a_claim_name_of_another_namespace_is_refused() -> None:
    result = plan({"modelCache": {"claimName": "other-team/weights"}})
    assert "spec.modelCache.claimName" in failed_fields(result)


# -- runtimes --------------------------------------------------------------------------------------


def test_sglang_as_the_reference_plans_it() -> None:
    result = plan(
        {
            "runtime": "sglang",
            "skipModelInit": True,  # SGLang fetches the repository itself
            "sglangConfig": {"contextLength": 8192, "toolCallParser": "qwen3", "enablePrefixCaching": False},
        },
        make_model("Qwen/Qwen3-4B", cache_key=None),
    )
    main = container(result)
    assert main["name"] == "sglang"
    assert main["image"] == "lmsysorg/sglang:v0.5.15.post1-cu129"
    assert main["command"] == ["python3", "-m", "sglang.launch_server"]
    assert main["ports"][0]["containerPort"] == 30000
    assert main["args"][:5] == ["--model-path", "Qwen/Qwen3-4B", "--port", "30000", "--enable-metrics"]
    assert main["args"][5:] == [
        "--host",
        "0.0.0.0",
        "--served-model-name",
        "tiny",
        "--context-length",
        "8192",
        "--disable-radix-cache",
        "--tool-call-parser",
        "qwen3",
    ]
    assert main["startupProbe"]["httpGet"]["path"] == "/health_generate"
    assert main["livenessProbe"]["httpGet"]["path"] == "/health"
    assert main["readinessProbe"]["httpGet"]["path"] == "/health_generate"
    hpa = plan({"runtime": "sglang", "autoscaling": {"maxReplicas": 2}}).hpa
    assert (
        hpa is not None and hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "sglang:num_running_reqs"
    )


def test_llamacpp_router_serves_the_models_directory() -> None:
    model = make_model(files=["a.gguf", "b.gguf"])
    main = container(plan({"runtime": "llamacpp-router"}, model))
    assert main["name"] == "llama-server"
    assert main["args"] == [
        "--models-dir",
        f"/models/{CACHE_KEY}",
        "--host",
        "0.0.0.0",
        "--port",
        "8080",
        "--metrics",
    ]
    assert main["image"].startswith("ghcr.io/ggml-org/llama.cpp:server-")


# -- endpoint --------------------------------------------------------------------------------------


def test_node_port_pins_the_service_port_where_node_ports_are_allowed() -> None:
    result = plan({"endpoint": {"type": "NodePort", "nodePort": 30080}}, config=ALL_TYPES)
    assert result.service is not None
    assert result.service["spec"]["ports"][0]["nodePort"] == 30080


def test_node_port_is_a_policy_violation_where_node_ports_are_not_allowed() -> None:
    config = OperatorConfig(
        tenancy=TenancyPolicy(allowed_service_types=frozenset({"ClusterIP", "LoadBalancer"}))
    )
    result = plan({"endpoint": {"type": "LoadBalancer", "nodePort": 30080}}, config=config)
    assert "spec.endpoint.nodePort" in failed_fields(result)
    assert result.status.scheduling_status == POLICY_VIOLATION


def test_node_port_needs_a_service_type_with_one() -> None:
    result = plan({"endpoint": {"nodePort": 30080}}, config=ALL_TYPES)
    assert "spec.endpoint.nodePort" in failed_fields(result)


# -- the Model's GPU fields ------------------------------------------------------------------------


def test_resource_name_and_toleration_key() -> None:
    model = make_model(
        hardware={
            "gpu": {
                "count": 1,
                "vendor": "amd",
                "resourceName": "squat.ai/dri-render",
                "tolerationKey": "amd.com/gpu",
            }
        }
    )
    result = plan({}, model)
    assert container(result)["resources"]["limits"]["squat.ai/dri-render"] == "1"
    assert pod_spec(result)["tolerations"][0]["key"] == "amd.com/gpu"


@pytest.mark.parametrize(("runtime", "tag"), [("vulkan", "server-vulkan-"), ("rocm", "server-rocm-")])
def test_gpu_runtime_picks_the_llamacpp_image(runtime: str, tag: str) -> None:
    model = make_model(hardware={"gpu": {"count": 1, "vendor": "amd", "runtime": runtime}})
    assert tag in container(plan({}, model))["image"]


def test_resource_claims_replace_the_extended_resource() -> None:
    claims = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]
    model = make_model(hardware={"gpu": {"count": 1, "resourceClaims": claims}})
    result = plan({}, model)
    assert pod_spec(result)["resourceClaims"] == claims
    resources = container(result)["resources"]
    assert resources["claims"] == [{"name": "gpu"}]
    assert "nvidia.com/gpu" not in resources.get("limits", {})


# -- accepted, no effect ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"turboQuantBits": 3}, "spec.turboQuantBits"),
        ({"pagedSSDCacheDir": "/ssd"}, "spec.pagedSSDCacheDir"),
        ({"hotCacheMaxSize": "100GB"}, "spec.hotCacheMaxSize"),
        ({"pagedSSDCacheMaxSize": "200GB"}, "spec.pagedSSDCacheMaxSize"),
        ({"disruption": {"protectAlways": True}}, "spec.disruption"),
        ({"slo": {"objective": "99.5"}}, "spec.slo"),
        ({"endpoint": {"gateway": {"enabled": True, "gatewayRef": {"name": "gw"}}}}, "spec.endpoint.gateway"),
        ({"resources": {"gpuSharing": {"mode": "shared", "memoryLimitGiB": 8}}}, "spec.resources.gpuSharing"),
    ],
)
def test_fields_without_effect_here_are_kept_and_reported(spec: dict[str, Any], field: str) -> None:
    isvc = make_isvc(spec)
    assert field.removeprefix("spec.").split(".")[0] in isvc.spec.to_json()  # kept, never dropped
    result = plan(isvc=isvc)
    assert result.deployment is not None  # planned as usual
    spec_valid = condition(result, "SpecValid")
    assert spec_valid is not None and spec_valid[:2] == ("False", "IgnoredSettings")
    assert f"{field}: has no effect here" in spec_valid[2]
    assert any(f"{field}: has no effect here" in e.message for e in result.events)


# -- what a tenant may not do ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("volume", "field"),
    [
        ({"name": "x", "nfs": {"server": "10.0.0.1", "path": "/"}}, "spec.extraVolumes[0].nfs"),
        (
            {"name": "x", "iscsi": {"targetPortal": "1.2.3.4", "iqn": "iqn.x", "lun": 0}},
            "spec.extraVolumes[0].iscsi",
        ),
        (
            {"name": "x", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}},
            "spec.extraVolumes[0].projected.sources[0].serviceAccountToken",
        ),
        ({"name": "x", "hostPath": {"path": "/etc"}}, "spec.extraVolumes"),
    ],
)
def test_volumes_the_admin_did_not_allow_are_policy_violations(volume: dict[str, Any], field: str) -> None:
    result = plan({"extraVolumes": [volume]})
    assert field in failed_fields(result)
    assert result.status.scheduling_status == POLICY_VIOLATION
    assert any(e.reason == POLICY_VIOLATION for e in result.events)


def test_an_admin_may_allow_more_volume_types_and_tokens() -> None:
    allowed = RESTRICTED_VOLUME_TYPES | {"nfs", "serviceAccountToken"}
    config = OperatorConfig(tenancy=TenancyPolicy(allowed_volume_types=allowed))
    volumes = [
        {"name": "shared", "nfs": {"server": "nfs.example", "path": "/models"}},
        {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
    ]
    assert plan({"extraVolumes": volumes}, config=config).status.phase == "Creating"


@pytest.mark.parametrize(
    "spec",
    [
        {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""}},
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
                                ]
                            }
                        ]
                    }
                }
            }
        },
        {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "preference": {
                                "matchExpressions": [
                                    {
                                        "key": "node-role.kubernetes.io/master",
                                        "operator": "In",
                                        "values": [""],
                                    }
                                ]
                            },
                        }
                    ]
                }
            }
        },
    ],
    ids=["nodeSelector", "required", "preferred"],
)
def test_control_plane_placement_is_refused_unless_allowed(spec: dict[str, Any]) -> None:
    refused = plan(spec)
    assert "control-plane" in failed_fields(refused)
    assert refused.status.scheduling_status == POLICY_VIOLATION
    allowed = OperatorConfig(tenancy=TenancyPolicy(allow_control_plane=True))
    assert plan(spec, config=allowed).status.phase == "Creating"


def test_avoiding_the_control_plane_is_fine() -> None:
    spec = {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "node-role.kubernetes.io/control-plane", "operator": "DoesNotExist"}
                            ]
                        }
                    ]
                }
            }
        }
    }
    assert plan(spec).status.phase == "Creating"


SGLANG_FLAGS: list[tuple[dict[str, Any], list[str]]] = [
    ({"tensorParallelSize": 2}, ["--tp", "2"]),
    ({"expertParallelSize": 2}, ["--ep-size", "2"]),
    ({"dataParallelSize": 2}, ["--dp", "2"]),
    ({"contextLength": 4096}, ["--context-length", "4096"]),
    ({"memFractionStatic": 0.8}, ["--mem-fraction-static", "0.8"]),
    ({"chunkedPrefillSize": 1024}, ["--chunked-prefill-size", "1024"]),
    ({"maxRunningRequests": 8}, ["--max-running-requests", "8"]),
    ({"quantization": "fp8"}, ["--quantization", "fp8"]),
    ({"kvCacheDtype": "fp8_e4m3"}, ["--kv-cache-dtype", "fp8_e4m3"]),
    ({"kvCacheDtype": "fp8_e4m3", "kvCacheCustomDtype": "fp4"}, ["--kv-cache-dtype", "fp4"]),
    ({"attentionBackend": "flashinfer"}, ["--attention-backend", "flashinfer"]),
    ({"enablePrefixCaching": False}, ["--disable-radix-cache"]),
    ({"toolCallParser": "hermes"}, ["--tool-call-parser", "hermes"]),
    ({"reasoningParser": "qwen3"}, ["--reasoning-parser", "qwen3"]),
    ({"chatTemplate": "chatml"}, ["--chat-template", "chatml"]),
    (
        {
            "speculative": {
                "enabled": True,
                "algorithm": "EAGLE",
                "draftModelPath": "/d",
                "numSteps": 3,
                "eagleTopK": 2,
                "numDraftTokens": 5,
                "acceptThresholdSingle": 0.5,
                "acceptThresholdAcc": 0.25,
            }
        },
        [
            "--speculative-algorithm",
            "EAGLE",
            "--speculative-draft-model-path",
            "/d",
            "--speculative-num-steps",
            "3",
            "--speculative-eagle-topk",
            "2",
            "--speculative-num-draft-tokens",
            "5",
            "--speculative-accept-threshold-single",
            "0.5",
            "--speculative-accept-threshold-acc",
            "0.25",
        ],
    ),
    ({"speculative": {"enabled": False, "algorithm": "EAGLE", "draftModelPath": "/d"}}, []),
    (
        {"loraAdapters": [{"name": "a", "path": "/a"}], "loraModules": ["b=/b"]},
        ["--lora-paths", "a=/a", "b=/b"],
    ),
    ({"maxLoraRank": 16}, ["--max-lora-rank", "16"]),
    ({"loraTargetModules": ["q_proj", "v_proj"]}, ["--lora-target-modules", "q_proj", "v_proj"]),
    ({"logLevel": "debug"}, ["--log-level", "debug"]),
    ({"trustRemoteCode": True}, ["--trust-remote-code"]),
    ({"skipTokenizerInit": True}, ["--skip-tokenizer-init"]),
]


@pytest.mark.parametrize(("config", "flags"), SGLANG_FLAGS)
def test_sglang_config_flags(config: dict[str, Any], flags: list[str]) -> None:
    gpu = make_model(hardware={"gpu": {"count": 1}})
    argv = args(plan({"runtime": "sglang", "skipModelInit": True, "sglangConfig": config}, gpu))
    tail = argv[argv.index("--served-model-name") + 2 :]
    assert tail == flags


def test_sglang_hf_token_and_gpu_only_memory_fraction() -> None:
    ref = {"name": "hf", "key": "HF_TOKEN"}
    result = plan(
        {
            "runtime": "sglang",
            "skipModelInit": True,
            "sglangConfig": {"hfTokenSecretRef": ref, "memFractionStatic": 0.8},
        }
    )
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": ref}} in container(result)["env"]
    assert "--mem-fraction-static" not in args(result)  # no GPU: nothing to take a fraction of


def test_sglang_takes_the_tensor_parallelism_from_the_gpu_count() -> None:
    gpus = make_model(hardware={"gpu": {"count": 2}})
    assert args(plan({"runtime": "sglang", "skipModelInit": True}, gpus))[-2:] == ["--tp", "2"]
    rocm = make_model(hardware={"gpu": {"count": 1, "vendor": "amd"}})
    assert container(plan({"runtime": "sglang", "skipModelInit": True}, rocm))["image"].endswith(
        "-rocm720-mi30x"
    )


def test_max_pod_lifetime_idle_timeout_is_reported_without_effect() -> None:
    spec_valid = condition(plan({"maxPodLifetimeIdleTimeoutSeconds": 60}), "SpecValid")
    assert (
        spec_valid is not None
        and "spec.maxPodLifetimeIdleTimeoutSeconds: has no effect here" in spec_valid[2]
    )


def test_the_serving_mode_is_ignored_by_runtimes_without_one() -> None:
    spec_valid = condition(plan({"runtime": "tgi", "mode": "embedding"}), "SpecValid")
    assert spec_valid is not None and 'spec.mode: is ignored by runtime "tgi"' in spec_valid[2]


def test_model_cache_is_ignored_without_a_download() -> None:
    result = plan({"modelCache": {"claimName": "c"}, "skipModelInit": True})
    spec_valid = condition(result, "SpecValid")
    assert spec_valid is not None and "spec.modelCache: is ignored with skipModelInit" in spec_valid[2]


def aged_pod(name: str, seconds: int, *, deleting: bool = False) -> dict[str, Any]:
    started = (NOW - timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")
    metadata: dict[str, Any] = {"name": name, "namespace": "ai"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-03-01T11:59:00Z"
    return {"metadata": metadata, "status": {"phase": "Running", "startTime": started}}


def test_max_pod_lifetime_recycles_the_oldest_expired_pod() -> None:
    ready = live_deployment(replicas=2, ready=2)
    pods = (aged_pod("young", 100), aged_pod("old", 4000), aged_pod("older", 5000))
    result = plan(
        {"replicas": 2, "maxPodLifetimeSeconds": 3600}, observed=observe(deployment=ready, pods=pods)
    )
    assert result.evictions == ("older",)
    assert any(e.reason == "PodRecycled" and "older" in e.message for e in result.events)
    # The next look: when the youngest pod still within its lifetime reaches it.
    assert result.requeue_after == pytest.approx(3600 - 100)


def test_max_pod_lifetime_waits_for_the_replicas_and_for_the_last_recycled_pod() -> None:
    pods = (aged_pod("old", 5000), aged_pod("going", 5000, deleting=True))
    ready = live_deployment(replicas=1, ready=1)
    waiting = plan({"maxPodLifetimeSeconds": 3600}, observed=observe(deployment=ready, pods=pods))
    assert waiting.evictions == () and waiting.requeue_after == 30.0
    not_ready = plan(
        {"replicas": 2, "maxPodLifetimeSeconds": 3600},
        observed=observe(deployment=live_deployment(replicas=2, ready=1), pods=(aged_pod("old", 5000),)),
    )
    assert not_ready.evictions == ()


def test_max_pod_lifetime_looks_again_when_the_first_pod_expires() -> None:
    ready = live_deployment(replicas=1, ready=1)
    result = plan(
        {"maxPodLifetimeSeconds": 3600}, observed=observe(deployment=ready, pods=(aged_pod("p", 600),))
    )
    assert result.evictions == () and result.requeue_after == pytest.approx(3000)
    assert plan({}, observed=observe(deployment=ready, pods=(aged_pod("p", 99999),))).evictions == ()
