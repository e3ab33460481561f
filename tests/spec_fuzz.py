"""Hypothesis strategies for the spec fuzz: InferenceService specs drawn from the contract schema,
in two flavours, and the Ready Models they are planned against.

- ``wild``: anything the contract schema accepts (schema_strategies.from_schema), Kubernetes
  sub-objects included. Nearly every such spec has something the API server would refuse in the
  objects built from it; the planner must say so and apply nothing.
- ``mild``: a wild spec in which, field by field and at random, a value is replaced by one a
  careful user would write (a real quantity, a label key, a toleration whose operator and effect
  agree...). The remaining wild fields keep the planner honest; the repaired ones let most examples
  reach the objects, so the valid path is fuzzed too.

Used by tests/integration/test_spec_fuzz_on_server.py (every planned object is dry-run applied as
the controller) and by the pure property tests.
"""

from typing import Any

from hypothesis import strategies as st
from schema_strategies import from_schema

from llmkube.api.crds import contract_schema
from llmkube.api.model import Model

SPEC_SCHEMA: dict[str, Any] = contract_schema()["properties"]["spec"]
#: PriorityClasses the fuzz's observed state has (the five of the install and one custom)
PRIORITY_CLASSES = {
    "llmkube-critical": 1_000_000,
    "llmkube-high": 100_000,
    "llmkube-normal": 10_000,
    "llmkube-low": 1_000,
    "llmkube-batch": 100,
    "custom": 5,
}

names = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?(\.[a-z0-9]{1,8}){0,2}", fullmatch=True)
quantities = st.sampled_from(["500m", "2", "1.5", "4Gi", "1024Mi", "1e3", "100M"])
label_keys = st.sampled_from(["team", "example.com/tier", "app.kubernetes.io/part-of", "a.b_c-d"])
label_values = st.sampled_from(["", "ml", "gold", "a.b-c_d", "x" * 63])
label_maps = st.dictionaries(label_keys, label_values, max_size=3)
annotation_maps = st.dictionaries(label_keys, st.text(max_size=20), max_size=3)
secret_refs = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["hf", "hf-token", "a.b"]),
        "key": st.sampled_from(["token", "HF_TOKEN", "a.b"]),
    },
    optional={"optional": st.booleans()},
)
env_sources = st.one_of(
    st.fixed_dictionaries({"secretKeyRef": secret_refs}),
    st.fixed_dictionaries({"configMapKeyRef": secret_refs}),
    st.fixed_dictionaries(
        {
            "fieldRef": st.fixed_dictionaries(
                {"fieldPath": st.sampled_from(["spec.nodeName", "metadata.name"])}
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "resourceFieldRef": st.fixed_dictionaries(
                {"resource": st.sampled_from(["limits.memory", "requests.cpu"])},
                optional={"containerName": st.just("")},
            )
        }
    ),
)
env_names = st.sampled_from(
    ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "LLAMA_ARG_THREADS", "A", "a.b-c", "_X1", "VLLM_PORT", "PATH"]
)
env_vars = st.lists(
    st.one_of(
        st.fixed_dictionaries({"name": env_names}, optional={"value": st.text(max_size=8)}),
        st.fixed_dictionaries({"name": env_names, "valueFrom": env_sources}),
    ),
    unique_by=lambda var: var["name"],
    max_size=4,
)
tolerations = st.lists(
    st.one_of(
        st.fixed_dictionaries(
            {"operator": st.just("Exists")},
            optional={
                "key": label_keys,
                "effect": st.sampled_from(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
            },
        ),
        st.fixed_dictionaries(
            {"key": label_keys, "operator": st.just("Equal"), "value": label_values},
            optional={"effect": st.sampled_from(["NoSchedule", "PreferNoSchedule"])},
        ),
        st.fixed_dictionaries(
            {
                "key": label_keys,
                "operator": st.sampled_from(["Equal", "Exists"]),
                "effect": st.just("NoExecute"),
                "tolerationSeconds": st.integers(0, 3600),
            }
        ),
    ),
    max_size=3,
)
handlers = st.one_of(
    st.fixed_dictionaries(
        {"httpGet": st.fixed_dictionaries({"port": st.one_of(st.integers(1, 65535), st.just("http"))})},
        optional={},
    ),
    st.fixed_dictionaries({"tcpSocket": st.fixed_dictionaries({"port": st.integers(1, 65535)})}),
    st.fixed_dictionaries(
        {"exec": st.fixed_dictionaries({"command": st.lists(st.text(min_size=1, max_size=5), max_size=2)})}
    ),
    st.fixed_dictionaries({"grpc": st.fixed_dictionaries({"port": st.integers(1, 65535)})}),
)
probe_timing = st.fixed_dictionaries(
    {},
    optional={
        "initialDelaySeconds": st.integers(0, 600),
        "periodSeconds": st.integers(1, 60),
        "timeoutSeconds": st.integers(1, 60),
        "failureThreshold": st.integers(1, 100),
    },
)
probes = st.builds(lambda handler, timing: {**handler, **timing}, handlers, probe_timing)
probe_overrides = st.fixed_dictionaries(
    {}, optional={"startup": probes, "liveness": probes, "readiness": probes}
)
seccomp = st.sampled_from(
    [
        {"type": "RuntimeDefault"},
        {"type": "Unconfined"},
        {"type": "Localhost", "localhostProfile": "profiles/llm.json"},
    ]
)
container_security = st.fixed_dictionaries(
    {},
    optional={
        "runAsNonRoot": st.booleans(),
        "runAsUser": st.integers(0, 65535),
        "runAsGroup": st.integers(0, 65535),
        "readOnlyRootFilesystem": st.booleans(),
        "allowPrivilegeEscalation": st.just(False),
        "privileged": st.just(False),
        "capabilities": st.fixed_dictionaries(
            {}, optional={"drop": st.just(["ALL"]), "add": st.just(["NET_BIND_SERVICE"])}
        ),
        "seccompProfile": seccomp,
        "procMount": st.just("Default"),
    },
)
pod_security = st.fixed_dictionaries(
    {},
    optional={
        "runAsNonRoot": st.booleans(),
        "runAsUser": st.integers(0, 65535),
        "fsGroup": st.integers(0, 65535),
        "supplementalGroups": st.lists(st.integers(0, 65535), max_size=2),
        "fsGroupChangePolicy": st.sampled_from(["OnRootMismatch", "Always"]),
        "seccompProfile": seccomp,
        "sysctls": st.lists(
            st.fixed_dictionaries(
                {
                    "name": st.sampled_from(["net.ipv4.ip_local_port_range", "kernel.shm_rmid_forced"]),
                    "value": st.sampled_from(["1024 65535", "1"]),
                },
            ),
            unique_by=lambda sysctl: sysctl["name"],
            max_size=2,
        ),
    },
)
autoscaling = st.builds(
    lambda low, spread, metrics: {"minReplicas": low, "maxReplicas": low + spread, "metrics": metrics},
    st.integers(1, 10),
    st.integers(0, 20),
    st.lists(
        st.one_of(
            st.fixed_dictionaries(
                {
                    "type": st.just("Pods"),
                    "name": st.sampled_from(["llamacpp:requests_processing", "vllm_num_requests_running"]),
                    "targetAverageValue": quantities,
                }
            ),
            st.fixed_dictionaries(
                {
                    "type": st.just("Resource"),
                    "name": st.sampled_from(["cpu", "memory"]),
                    "targetAverageUtilization": st.integers(1, 100),
                }
            ),
        ),
        max_size=2,
    ),
)
runtime_images = st.sampled_from([None, "registry.invalid/server:1"])
vllm_configs = st.fixed_dictionaries(
    {},
    optional={
        "tensorParallelSize": st.integers(1, 8),
        "maxModelLen": st.integers(128, 131072),
        "hfTokenSecretRef": secret_refs,
        "dtype": st.sampled_from(["auto", "float16"]),
        "speculative": st.fixed_dictionaries(
            {"enabled": st.booleans()}, optional={"model": st.sampled_from(["Org/Draft", ""])}
        ),
    },
)
tgi_configs = st.fixed_dictionaries(
    {},
    optional={
        "maxInputLength": st.integers(1, 8192),
        "maxTotalTokens": st.integers(1, 16384),
        "hfTokenSecretRef": secret_refs,
    },
)

#: field -> a value a careful user would write (what `mild` repairs, each with probability 3/4)
REPAIRS: dict[str, st.SearchStrategy[Any]] = {
    "podLabels": label_maps,
    "nodeSelector": label_maps,
    "podAnnotations": annotation_maps,
    "tolerations": tolerations,
    "env": env_vars,
    "imagePullSecrets": st.lists(
        st.fixed_dictionaries({"name": st.sampled_from(["regcred", "a.b", "other"])}),
        unique_by=lambda ref: ref["name"],
        max_size=2,
    ),
    "securityContext": container_security,
    "podSecurityContext": pod_security,
    "probeOverrides": probe_overrides,
    "runtimeClassName": st.sampled_from(["nvidia", "kata.io", ""]),
    "priorityClassName": st.sampled_from(["custom", "llmkube-high", ""]),
    "autoscaling": autoscaling,
    "vllmConfig": vllm_configs,
    "tgiConfig": tgi_configs,
    "image": runtime_images,
}


@st.composite
def mild(draw: st.DrawFn, spec: dict[str, Any]) -> dict[str, Any]:
    spec = dict(spec)
    if spec.get("resources") is not None:
        resources = dict(spec["resources"])
        for key in ("cpu", "memory", "hostMemory", "gpuMemory"):
            if resources.get(key) is not None and draw(st.sampled_from([True, True, True, False])):
                resources[key] = draw(quantities)
        spec["resources"] = resources
    for field, repaired in REPAIRS.items():
        if field in spec and draw(st.sampled_from([True, True, True, False])):
            spec[field] = draw(repaired)
    if spec.get("runtime") in ("generic", "personaplex") and not spec.get("image"):
        spec["image"] = "registry.invalid/server:1"
    return spec


wild_specs: st.SearchStrategy[dict[str, Any]] = from_schema(SPEC_SCHEMA)
mild_specs: st.SearchStrategy[dict[str, Any]] = wild_specs.flatmap(mild)


def model_of(name: str, source: str, hardware: dict[str, Any] | None, namespace: str) -> Model:
    """A Ready Model as the Model controller leaves it (cacheKey only for http sources)."""
    spec: dict[str, Any] = {"source": source}
    if hardware:
        spec["hardware"] = hardware
    status = {"phase": "Ready", "cacheKey": "0123456789abcdef" if source.startswith("https") else ""}
    return Model.model_validate(
        {"metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": status}
    )


model_shapes = st.sampled_from(
    [
        ("cpu", "https://models.invalid/tiny.gguf", None),
        ("hf", "Org/Repo-7B", None),
        ("pvc", "pvc://weights/dir/x.gguf", None),
        ("one-gpu", "Org/Repo-7B", {"accelerator": "cuda", "gpu": {"count": 1}}),
        ("two-gpus", "https://models.invalid/big.gguf", {"accelerator": "cuda", "gpu": {"count": 2}}),
        (
            "amd",
            "https://models.invalid/x.gguf",
            {"accelerator": "rocm", "gpu": {"count": 1, "vendor": "amd"}},
        ),
    ]
)
