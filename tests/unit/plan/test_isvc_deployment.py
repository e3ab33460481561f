"""The Deployment intent for every field that shapes it: tolerations and node selectors on every
service, the named port, labels kept current, removed pod labels and annotations gone."""

import itertools
from typing import Any

import pytest
from isvc_factories import UID, gpu_model, make_isvc, make_model
from isvc_planning import args, container, env_names, plan, pod_spec

from llmkube.plan.inferenceservice.config import OperatorConfig

OPERATOR_LABELS = {
    "app": "demo",
    "inference.llmkube.dev/model": "tiny",
    "inference.llmkube.dev/service": "demo",
    "inference.llmkube.dev/runtime": "llamacpp",
}
SELECTOR = {"app": "demo", "inference.llmkube.dev/service": "demo"}


def test_metadata_labels_owner_and_selector() -> None:
    deployment = plan().deployment
    assert deployment is not None
    assert deployment["apiVersion"] == "apps/v1" and deployment["kind"] == "Deployment"
    meta = deployment["metadata"]
    assert (meta["name"], meta["namespace"]) == ("demo", "ai")
    assert meta["labels"] == {**OPERATOR_LABELS, "app.kubernetes.io/managed-by": "llmkube"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "inference.llmkube.dev/v1alpha1",
            "kind": "InferenceService",
            "name": "demo",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": False,
        }
    ]
    assert deployment["spec"]["selector"] == {"matchLabels": SELECTOR}


def test_model_ref_is_not_in_the_selector_so_it_stays_mutable() -> None:
    deployment = plan({"modelRef": "other"}, make_model(name="other")).deployment
    assert deployment is not None
    assert deployment["spec"]["selector"]["matchLabels"] == SELECTOR
    assert deployment["metadata"]["labels"]["inference.llmkube.dev/model"] == "other"  # refreshed


def test_runtime_label_follows_the_runtime() -> None:
    deployment = plan({"runtime": "vllm"}).deployment
    assert deployment is not None
    assert deployment["spec"]["template"]["metadata"]["labels"]["inference.llmkube.dev/runtime"] == "vllm"


def test_pod_labels_merge_operator_labels_win_and_annotations_copied() -> None:
    spec = {
        "podLabels": {"team": "ml", "app": "hijack", "inference.llmkube.dev/service": "x"},
        "podAnnotations": {"prometheus.io/scrape": "true"},
    }
    deployment = plan(spec).deployment
    assert deployment is not None
    template = deployment["spec"]["template"]["metadata"]
    assert template["labels"] == {"team": "ml", **OPERATOR_LABELS}
    assert template["annotations"] == {"prometheus.io/scrape": "true"}
    assert deployment["spec"]["selector"]["matchLabels"] == SELECTOR


def test_no_annotations_key_without_pod_annotations() -> None:
    deployment = plan({"podAnnotations": {}}).deployment
    assert deployment is not None and "annotations" not in deployment["spec"]["template"]["metadata"]


@pytest.mark.parametrize(
    ("spec", "replicas"),
    [
        ({}, 1),
        ({"replicas": 3}, 3),
        ({"replicas": 0}, 0),
        ({"replicas": None}, 1),
        ({"autoscaling": {"maxReplicas": 5}}, None),  # the HPA owns the count: not in the intent
        ({"replicas": 2, "autoscaling": {"maxReplicas": 5}}, None),
        ({"replicas": 0, "autoscaling": {"maxReplicas": 5}}, 0),  # stopping wins over autoscaling
    ],
)
def test_replicas(spec: dict[str, Any], replicas: int | None) -> None:
    deployment = plan(spec).deployment
    assert deployment is not None
    assert deployment["spec"].get("replicas") == replicas


ROLLING_DEFAULT = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}


@pytest.mark.parametrize(
    ("model", "strategy"), [(make_model(), ROLLING_DEFAULT), (gpu_model(1), {"type": "Recreate"})]
)
def test_strategy_recreate_for_gpu_services_and_the_server_default_spelled_out_otherwise(
    model: Any, strategy: dict[str, Any]
) -> None:
    deployment = plan(model=model).deployment
    assert deployment is not None and deployment["spec"].get("strategy") == strategy


def test_strategy_recreate_when_the_gpu_comes_from_the_service() -> None:
    deployment = plan({"resources": {"gpu": 1}}).deployment
    assert deployment is not None and deployment["spec"]["strategy"] == {"type": "Recreate"}


NON_ROOT = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532}


@pytest.mark.parametrize(
    ("spec", "config", "expected"),
    [
        ({}, OperatorConfig(), {**NON_ROOT, "seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 102}),
        ({}, OperatorConfig(default_fsgroup=0), {**NON_ROOT, "seccompProfile": {"type": "RuntimeDefault"}}),
        ({}, OperatorConfig(default_fsgroup=-1), {**NON_ROOT, "seccompProfile": {"type": "RuntimeDefault"}}),
        # An image we do not know runs as the user it was built for.
        (
            {"runtime": "generic", "image": "i"},
            OperatorConfig(),
            {"seccompProfile": {"type": "RuntimeDefault"}, "fsGroup": 102},
        ),
        (
            {"podSecurityContext": {"runAsUser": 1000, "fsGroup": 7}},
            OperatorConfig(),
            {"runAsUser": 1000, "fsGroup": 7},
        ),
        (
            {"podSecurityContext": {}},
            OperatorConfig(),
            None,
        ),  # an explicit empty context opts out of defaults
    ],
)
def test_pod_security_context(
    spec: dict[str, Any], config: OperatorConfig, expected: dict[str, Any] | None
) -> None:
    assert pod_spec(plan(spec, config=config)).get("securityContext") == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {},
            {
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
                "readOnlyRootFilesystem": True,
            },
        ),
        # An image we do not know keeps a writable root (plan/inferenceservice/hardening.py).
        (
            {"runtime": "generic", "image": "i"},
            {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        ),
        ({"securityContext": {"readOnlyRootFilesystem": False}}, {"readOnlyRootFilesystem": False}),
    ],
)
def test_container_security_context(spec: dict[str, Any], expected: dict[str, Any]) -> None:
    assert container(plan(spec))["securityContext"] == expected


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, "llmkube-normal"),
        ({"priority": "critical"}, "llmkube-critical"),
        ({"priority": "batch"}, "llmkube-batch"),
    ],
)
def test_priority_class_name_is_always_set(spec: dict[str, Any], expected: str) -> None:
    assert pod_spec(plan(spec))["priorityClassName"] == expected


def test_runtime_class_and_image_pull_secrets_pass_through() -> None:
    spec = {"runtimeClassName": "nvidia", "imagePullSecrets": [{"name": "regcred"}]}
    pod = pod_spec(plan(spec))
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    bare = pod_spec(plan({"runtimeClassName": "", "imagePullSecrets": []}))
    assert "runtimeClassName" not in bare and "imagePullSecrets" not in bare


USER_TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (make_model(), [USER_TOLERATION]),  # applied to CPU services too
        (
            gpu_model(1),
            [
                {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
                USER_TOLERATION,
            ],
        ),
        (
            make_model(hardware={"accelerator": "rocm", "gpu": {"count": 1}}),
            [
                {"key": "amd.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
                USER_TOLERATION,
            ],
        ),
    ],
)
def test_tolerations(model: Any, expected: list[dict[str, str]]) -> None:
    assert pod_spec(plan({"tolerations": [USER_TOLERATION]}, model))["tolerations"] == expected


def test_gpu_toleration_alone_and_no_tolerations_for_plain_cpu() -> None:
    assert len(pod_spec(plan(model=gpu_model(1)))["tolerations"]) == 1
    assert "tolerations" not in pod_spec(plan())


@pytest.mark.parametrize("model", [make_model(), gpu_model(1)])
def test_node_selector_always_applied(model: Any) -> None:
    assert pod_spec(plan({"nodeSelector": {"pool": "a"}}, model))["nodeSelector"] == {"pool": "a"}
    assert "nodeSelector" not in pod_spec(plan({"nodeSelector": {}}, model))


@pytest.mark.parametrize(
    ("model", "resources", "expected"),
    [
        (make_model(), None, None),
        (make_model(), {}, None),
        # The memory limit is the request (plan/inferenceservice/hardening.py); CPU is never limited.
        (
            make_model(),
            {"cpu": "2", "memory": "4Gi"},
            {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"memory": "4Gi"}},
        ),
        (
            make_model(),
            {"cpu": "0.5", "memory": "1024Mi"},
            {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
        ),
        (
            make_model(),
            {"memory": "4Gi", "hostMemory": "64Gi"},
            {"requests": {"memory": "64Gi"}, "limits": {"memory": "64Gi"}},
        ),
        (make_model(), {"gpuMemory": "16Gi"}, None),  # validated only, never in the pod
        (gpu_model(2), None, {"limits": {"nvidia.com/gpu": "2"}}),
        (
            make_model(hardware={"accelerator": "intel", "gpu": {"count": 1}}),
            {"cpu": "4"},
            {"limits": {"gpu.intel.com/i915": "1"}, "requests": {"cpu": "4"}},
        ),
        (make_model(), {"gpu": 1}, {"limits": {"nvidia.com/gpu": "1"}}),
    ],
)
def test_resources(model: Any, resources: dict[str, Any] | None, expected: dict[str, Any] | None) -> None:
    spec = {"resources": resources} if resources is not None else {}
    assert container(plan(spec, model)).get("resources") == expected


@pytest.mark.parametrize(
    ("runtime", "port", "handler"),
    [
        ("llamacpp", 8080, {"httpGet": {"path": "/health", "port": 8080}}),
        ("vllm", 8000, {"httpGet": {"path": "/health", "port": 8000}}),
        ("tgi", 80, {"httpGet": {"path": "/health", "port": 80}}),
        ("personaplex", 8998, {"tcpSocket": {"port": 8998}}),
        ("generic", 8080, {"tcpSocket": {"port": 8080}}),
    ],
)
def test_default_probes_per_runtime(runtime: str, port: int, handler: dict[str, Any]) -> None:
    c = container(plan({"runtime": runtime, "image": "img"}))
    assert c["ports"] == [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    assert c["startupProbe"] == {**handler, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 180}
    assert c["livenessProbe"] == {**handler, "periodSeconds": 15, "timeoutSeconds": 5, "failureThreshold": 3}
    assert c["readinessProbe"] == {**handler, "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3}


@pytest.mark.parametrize("which", ["startup", "liveness", "readiness"])
def test_probe_override_replaces_only_its_probe(which: str) -> None:
    override = {"exec": {"command": ["true"]}, "periodSeconds": 1}
    c = container(plan({"probeOverrides": {which: override}}))
    assert c[f"{which}Probe"] == override
    for other in {"startup", "liveness", "readiness"} - {which}:
        assert "httpGet" in c[f"{other}Probe"]


@pytest.mark.parametrize(
    ("spec", "port"),
    [
        ({}, 8080),
        ({"containerPort": 9000}, 9000),
        ({"endpoint": {"port": 8001}}, 8001),
        ({"containerPort": 9000, "endpoint": {"port": 8001}}, 9000),
        ({"runtime": "vllm"}, 8000),
        ({"runtime": "vllm", "endpoint": {}}, 8080),  # the endpoint object defaults its port to 8080
        ({"runtime": "vllm", "endpoint": {"port": None}}, 8000),
    ],
)
def test_container_port_resolution_reaches_port_probes_and_args(spec: dict[str, Any], port: int) -> None:
    result = plan(spec)
    c = container(result)
    assert c["ports"][0]["containerPort"] == port
    assert c["readinessProbe"]["httpGet"]["port"] == port
    assert args(result)[args(result).index("--port") + 1] == str(port)


def test_env_runtime_first_then_user_and_a_user_entry_replaces_the_generated_one() -> None:
    spec = {
        "runtime": "vllm",
        "vllmConfig": {"hfTokenSecretRef": {"name": "hf", "key": "t"}},
        "env": [
            {"name": "HF_TOKEN", "value": "override"},
            {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
    }
    assert container(plan(spec))["env"] == [
        {
            "name": "HOME",
            "value": "/tmp",
        },  # the read-only root's writable home (plan/inferenceservice/hardening.py)
        {"name": "HF_TOKEN", "value": "override"},
        {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName", "apiVersion": "v1"}}},
    ]
    assert container(plan())["env"] == [{"name": "HOME", "value": "/tmp"}]
    assert "env" not in container(plan({"runtime": "generic", "image": "i"}))
    # Without a collision, the generated variables come first.
    spec["env"] = spec["env"][1:]
    assert env_names(plan(spec)) == ["HOME", "HF_TOKEN", "X"]
    assert container(plan(spec))["env"][1]["valueFrom"] == {"secretKeyRef": {"name": "hf", "key": "t"}}
    # A HOME of the user's own replaces ours.
    spec["env"] = [{"name": "HOME", "value": "/home/me"}]
    assert container(plan(spec))["env"][-1] == {"name": "HOME", "value": "/home/me"}
    assert env_names(plan(spec)).count("HOME") == 1


@pytest.mark.parametrize(
    ("runtime", "config", "name"),
    [
        ("tgi", {"tgiConfig": {"hfTokenSecretRef": {"name": "hf", "key": "t"}}}, "HUGGING_FACE_HUB_TOKEN"),
        ("personaplex", {"image": "i"}, "NO_TORCH_COMPILE"),
        (
            "personaplex",
            {"image": "i", "personaPlexConfig": {"hfTokenSecretRef": {"name": "hf", "key": "t"}}},
            "HF_TOKEN",
        ),
    ],
)
def test_every_generated_variable_can_be_replaced_by_the_user(
    runtime: str, config: dict[str, Any], name: str
) -> None:
    mine = {"name": name, "value": "mine"}
    env = container(plan({"runtime": runtime, **config, "env": [mine]}))["env"]
    assert [var for var in env if var["name"] == name] == [mine]
    assert env[-1] == mine


@pytest.mark.parametrize(
    ("spec", "command"),
    [
        ({}, None),
        ({"command": ["/bin/server"]}, ["/bin/server"]),
        ({"runtime": "personaplex", "image": "i"}, ["/app/moshi/.venv/bin/python", "-m", "moshi.server"]),
        ({"runtime": "personaplex", "image": "i", "command": ["moshi"]}, ["moshi"]),
        ({"runtime": "generic", "image": "i", "command": ["serve"]}, ["serve"]),
        ({"command": []}, None),
    ],
)
def test_command(spec: dict[str, Any], command: list[str] | None) -> None:
    assert container(plan(spec)).get("command") == command


def test_generic_args_and_no_args_key_when_unset() -> None:
    assert args(plan({"runtime": "generic", "image": "i", "args": ["--x", "1"]})) == ["--x", "1"]
    assert "args" not in container(plan({"runtime": "generic", "image": "i"}))


LLAMA = "ghcr.io/ggml-org/llama.cpp"


@pytest.mark.parametrize(
    ("spec", "hardware", "image"),
    [
        ({}, None, f"{LLAMA}:server-b10068"),
        ({"image": f"{LLAMA}:server-cuda13"}, None, f"{LLAMA}:server-cuda13"),
        ({"runtime": "vllm"}, None, "vllm/vllm-openai:v0.20.0"),
        ({"runtime": "tgi"}, None, "ghcr.io/huggingface/text-generation-inference:3.3.7"),
        ({"runtime": "generic", "image": "my/server:1"}, None, "my/server:1"),
        # A GPU from the service alone (the Model says nothing): NVIDIA, the default vendor, so CUDA.
        ({"resources": {"gpu": 1}}, None, f"{LLAMA}:server-cuda-b10068"),
        ({"resources": {"gpu": 1}}, {"accelerator": "cuda"}, f"{LLAMA}:server-cuda-b10068"),
        ({}, {"accelerator": "cuda", "gpu": {"count": 2}}, f"{LLAMA}:server-cuda-b10068"),
        ({}, {"accelerator": "rocm", "gpu": {"count": 1}}, f"{LLAMA}:server-rocm-b10068"),
        ({}, {"gpu": {"count": 1, "vendor": "amd"}}, f"{LLAMA}:server-rocm-b10068"),
        ({}, {"accelerator": "intel", "gpu": {"count": 1}}, f"{LLAMA}:server-intel-b10068"),
        (
            {},
            {"accelerator": "vulkan", "gpu": {"count": 1, "vendor": "amd"}},
            f"{LLAMA}:server-vulkan-b10068",
        ),
        ({}, {"accelerator": "vulkan", "gpu": {"count": 1}}, f"{LLAMA}:server-vulkan-b10068"),
        # No GPU in the pod: the CPU build, whatever the Model's accelerator says.
        ({}, {"accelerator": "cuda"}, f"{LLAMA}:server-b10068"),
        # The user's image wins over the GPU choice; vLLM's image serves every GPU.
        ({"image": "mine:1", "resources": {"gpu": 1}}, None, "mine:1"),
        ({"runtime": "vllm", "resources": {"gpu": 1}}, {"accelerator": "cuda"}, "vllm/vllm-openai:v0.20.0"),
    ],
)
def test_image(spec: dict[str, Any], hardware: dict[str, Any] | None, image: str) -> None:
    assert container(plan(spec, make_model(hardware=hardware)))["image"] == image


def test_every_gpu_service_gets_a_gpu_build_and_every_default_is_pinned() -> None:
    """The class, not only the instances: for every runtime, accelerator, vendor and GPU count, a
    llama.cpp pod with a GPU limit never runs the CPU build, and no default image floats."""
    runtimes = ("llamacpp", "vllm", "tgi")
    for runtime, accelerator, vendor, gpus in itertools.product(
        runtimes, ("cpu", "cuda", "rocm", "vulkan", "intel"), ("nvidia", "amd", "intel"), (0, 1, 2)
    ):
        hardware = {"accelerator": accelerator, "gpu": {"vendor": vendor}}
        found = container(
            plan({"runtime": runtime, "resources": {"gpu": gpus}}, make_model(hardware=hardware))
        )
        image = found["image"]
        assert not image.endswith(":latest") and ":" in image.rsplit("/", 1)[-1], image
        has_gpu = bool((found.get("resources") or {}).get("limits", {}).keys() - {"memory", "cpu"})
        assert has_gpu == (gpus > 0)
        if runtime == "llamacpp":
            assert (image == f"{LLAMA}:server-b10068") == (gpus == 0), (accelerator, vendor, gpus, image)


@pytest.mark.parametrize(
    ("overrides", "spec", "hardware", "image"),
    [
        (
            {"llamacpp-cuda": "mirror.local/llama:cuda"},
            {"resources": {"gpu": 1}},
            None,
            "mirror.local/llama:cuda",
        ),
        ({"llamacpp-cuda": "mirror.local/llama:cuda"}, {}, None, f"{LLAMA}:server-b10068"),
        ({"llamacpp": "mirror.local/llama:cpu"}, {}, None, "mirror.local/llama:cpu"),
        ({"llamacpp-rocm": "m/rocm:1"}, {}, {"accelerator": "rocm", "gpu": {"count": 1}}, "m/rocm:1"),
        ({"vllm": "m/vllm:1"}, {"runtime": "vllm"}, None, "m/vllm:1"),
        ({"tgi": "m/tgi:1"}, {"runtime": "tgi"}, None, "m/tgi:1"),
        # spec.image still wins over the admin's default.
        ({"llamacpp": "m/cpu:1"}, {"image": "mine:2"}, None, "mine:2"),
    ],
)
def test_runtime_images_replace_the_defaults(
    overrides: dict[str, str], spec: dict[str, Any], hardware: dict[str, Any] | None, image: str
) -> None:
    config = OperatorConfig(runtime_images=overrides)
    assert container(plan(spec, make_model(hardware=hardware), config=config))["image"] == image


@pytest.mark.parametrize(("runtime", "links"), [("vllm", False), ("llamacpp", None), ("tgi", None)])
def test_service_links_off_for_vllm(runtime: str, links: bool | None) -> None:
    assert pod_spec(plan({"runtime": runtime})).get("enableServiceLinks") == links


@pytest.mark.parametrize(
    ("runtime", "container_name"), [("llamacpp", "llama-server"), ("vllm", "vllm"), ("tgi", "tgi")]
)
def test_container_name(runtime: str, container_name: str) -> None:
    assert container(plan({"runtime": runtime}))["name"] == container_name


def test_storage_reaches_the_pod() -> None:
    pod = pod_spec(plan())
    assert [c["name"] for c in pod["initContainers"]] == ["model-downloader"]
    assert [v["name"] for v in pod["volumes"]] == ["model-cache", "tmp"]
    assert container(plan())["volumeMounts"] == [
        {"name": "model-cache", "mountPath": "/models", "readOnly": True},
        {"name": "tmp", "mountPath": "/tmp"},
    ]


@pytest.mark.parametrize(
    ("spec", "writable"),
    [
        ({"skipModelInit": True}, ["/tmp"]),
        ({"runtime": "tgi"}, ["/tmp", "/data"]),
        ({"runtime": "generic", "image": "i"}, []),
    ],
)
def test_no_storage_keys_without_model_init(spec: dict[str, Any], writable: list[str]) -> None:
    """Only the emptyDirs of the directories the runtime writes (plan/inferenceservice/hardening.py)."""
    pod = pod_spec(plan(spec))
    assert "initContainers" not in pod
    assert [v for v in pod.get("volumes", []) if "emptyDir" not in v] == []
    assert [m["mountPath"] for m in container(plan(spec)).get("volumeMounts", [])] == writable


def test_the_intent_shares_nothing_with_the_service() -> None:
    spec = {
        "env": [{"name": "A", "value": "1"}],
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "imagePullSecrets": [{"name": "r"}],
        "nodeSelector": {"pool": "a"},
        "securityContext": {"runAsNonRoot": True},
        "podSecurityContext": {"runAsUser": 1},
        "probeOverrides": {"startup": {"tcpSocket": {"port": 1}}},
    }
    isvc = make_isvc(spec)
    before = isvc.spec.model_dump()
    pod = pod_spec(plan(isvc=isvc))
    pod["containers"][0]["env"][0]["value"] = "changed"
    pod["containers"][0]["securityContext"]["runAsNonRoot"] = False
    pod["containers"][0]["startupProbe"]["tcpSocket"]["port"] = 2
    pod["tolerations"][0]["key"] = "changed"
    pod["imagePullSecrets"][0]["name"] = "changed"
    pod["nodeSelector"]["pool"] = "changed"
    pod["securityContext"]["runAsUser"] = 2
    assert isvc.spec.model_dump() == before


@pytest.mark.parametrize(
    ("var", "stored"),
    [
        ({"name": "A", "value": ""}, {"name": "A"}),
        ({"name": "A", "value": "x"}, {"name": "A", "value": "x"}),
        (
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ),
        (  # the selector is atomic: the server's default apiVersion would count as a difference
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName", "apiVersion": "v1"}}},
        ),
        (
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x", "apiVersion": "v2"}}},
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x", "apiVersion": "v2"}}},
        ),
    ],
)
def test_env_vars_are_applied_as_the_server_stores_them(var: dict[str, Any], stored: dict[str, Any]) -> None:
    from llmkube.plan.inferenceservice.deployment import stored_env_var

    assert stored_env_var(var) == stored
