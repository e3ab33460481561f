"""Real inference end to end on the node: the in-cluster controller turns a Model (an http URL
served inside the cluster) and a llama.cpp InferenceService into a pod whose init container really
downloads the GGUF into the namespace's cache claim, whose llama-server really loads it and passes
its probes, and whose Service really answers a chat completion. Then the service changes."""

from pathlib import Path
from typing import Any

import yaml
from conftest import ModelSource
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import KubeRest, condition_true
from llmkube_testing.tiny_gguf import write_tiny_gguf
from llmkube_testing.tiny_service import chat_request, tiny_llamacpp
from node_support import API, TIMINGS, Stopwatch, eventually_http, http, wait_for
from test_in_cluster_controller import requests_by_code

from llmkube.plan.inferenceservice.names import CACHE_PVC_NAME

SELECTOR = "inference.llmkube.dev/service=tiny"


def isvc(admin: KubeRest, namespace: str) -> dict[str, Any]:
    return admin.get(API, "InferenceService", "tiny", namespace)


def phase(admin: KubeRest, namespace: str) -> str:
    return str((isvc(admin, namespace).get("status") or {}).get("phase"))


def the_ready_pod(admin: KubeRest, namespace: str) -> dict[str, Any] | None:
    """The only pod of the service, once it is Ready and the service says so."""
    pods = admin.list("v1", "Pod", namespace, label_selector=SELECTOR)
    if len(pods) != 1 or not condition_true(pods[0], "Ready") or phase(admin, namespace) != "Ready":
        return None
    return pods[0]


def args_of(pod: dict[str, Any]) -> list[str]:
    (container,) = pod["spec"]["containers"]
    return list(container["args"])


def complete(node: NodeCluster, admin: KubeRest, namespace: str) -> dict[str, Any]:
    service = admin.get("v1", "Service", "tiny", namespace)
    url = f"http://{service['spec']['clusterIP']}:8080/v1/chat/completions"
    body: dict[str, Any] = eventually_http(node, url, chat_request()).json()
    return body


def patch_spec(admin: KubeRest, namespace: str, spec: dict[str, Any]) -> None:
    admin.request(
        "PATCH",
        admin.path_for(API, "InferenceService", namespace, "tiny"),
        {"spec": spec},
        content_type="application/merge-patch+json",
    )


def test_a_llamacpp_service_serves_real_tokens_through_its_lifecycle(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, node_namespace: str, tmp_path: Path
) -> None:
    admin, ns = node_cluster.admin(), node_namespace
    # Where Pod Security is "restricted": the default pod (server and downloader) must run there.
    restricted = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}
    admin.request(
        "PATCH", f"/api/v1/namespaces/{ns}", restricted, content_type="application/merge-patch+json"
    )
    objects = tiny_llamacpp(ns, "tiny", model_source.url())

    watch = Stopwatch()
    node_cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
    pod = wait_for(lambda: the_ready_pod(admin, ns), within=300, what="the service Ready with one Ready pod")
    TIMINGS["kubectl apply Model+InferenceService -> Ready (s)"] = watch.seconds()
    answer = complete(node_cluster, admin, ns)
    TIMINGS["kubectl apply Model+InferenceService -> first completion (s)"] = watch.seconds()

    # Real tokens, from the model the init container put in the namespace cache.
    assert answer["object"] == "chat.completion"
    assert answer["usage"]["completion_tokens"] > 0 and answer["usage"]["prompt_tokens"] > 0
    assert answer["choices"][0]["message"]["role"] == "assistant"
    (init,) = pod["status"]["initContainerStatuses"]
    assert init["name"] == "model-downloader"
    assert init["state"]["terminated"]["exitCode"] == 0
    model_path = args_of(pod)[args_of(pod).index("--model") + 1]
    claim = admin.get("v1", "PersistentVolumeClaim", CACHE_PVC_NAME, ns)
    assert claim["status"]["phase"] == "Bound"
    volume = admin.get("v1", "PersistentVolume", claim["spec"]["volumeName"])
    cached = Path(volume["spec"]["hostPath"]["path"]) / Path(model_path).relative_to("/models")
    assert cached.read_bytes() == write_tiny_gguf(tmp_path / "expected.gguf").read_bytes()
    assert args_of(pod)[args_of(pod).index("--ctx-size") + 1] == "256"
    # ... and all of it in the hardened pod (plan/inferenceservice/hardening.py): no ServiceAccount
    # token, read-only roots (llama-server writes only its emptyDir /tmp; the downloader only
    # /models), capped init.
    assert pod["spec"]["automountServiceAccountToken"] is False
    # Non-root, as restricted wants: llama-server and curl run as 65532 and read and write the model.
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["runAsUser"] == 65532
    (server,) = pod["spec"]["containers"]
    assert server["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"name": "HOME", "value": "/tmp"} in server["env"]
    assert {"name": "tmp", "mountPath": "/tmp"} in server["volumeMounts"]
    assert server["resources"]["limits"] == {"memory": "256Mi"}  # the request: it serves within it
    (downloader,) = pod["spec"]["initContainers"]
    assert downloader["securityContext"]["readOnlyRootFilesystem"] is True
    assert downloader["resources"]["limits"] == {"memory": "512Mi"}

    # A new context size rolls the pod over: a new pod with the new --ctx-size, and it serves.
    patch_spec(admin, ns, {"contextSize": 512})
    watch = Stopwatch()
    new_pod = wait_for(
        lambda: (p := the_ready_pod(admin, ns)) and p["metadata"]["name"] != pod["metadata"]["name"] and p,
        within=300,
        what="the rollout to a pod with --ctx-size 512",
    )
    TIMINGS["contextSize change -> new pod Ready (s)"] = watch.seconds()
    assert args_of(new_pod)[args_of(new_pod).index("--ctx-size") + 1] == "512"
    props = http(node_cluster, f"http://{new_pod['status']['podIP']}:8080/props").json()
    assert props["default_generation_settings"]["n_ctx"] == 512
    assert complete(node_cluster, admin, ns)["usage"]["completion_tokens"] > 0

    # Scale to zero: Stopped, and no pod left (terminated, not just terminating).
    patch_spec(admin, ns, {"replicas": 0})
    wait_for(
        lambda: phase(admin, ns) == "Stopped" and not admin.list("v1", "Pod", ns, label_selector=SELECTOR),
        within=120,
        what="Stopped, no pods",
    )

    # Back to one: serves again, from the cache this time.
    patch_spec(admin, ns, {"replicas": 1})
    watch = Stopwatch()
    again = wait_for(lambda: the_ready_pod(admin, ns), within=300, what="Ready again after scaling up")
    assert complete(node_cluster, admin, ns)["usage"]["completion_tokens"] > 0
    TIMINGS["scale 0 -> 1 -> completion (s)"] = watch.seconds()
    # The API server reads the log from the kubelet (its client certificate against the node's).
    code, log = admin.get_text(
        f"/api/v1/namespaces/{ns}/pods/{again['metadata']['name']}/log?container=model-downloader"
    )
    assert code == 200 and "llmkube-download: cache hit: all 1 files are in /models/" in log, log
    assert "(0 downloaded, 1 cache hits)" in log, log

    # Delete: everything the service owned goes; the namespace's cache claim and the Model stay.
    admin.delete(API, "InferenceService", "tiny", ns)
    wait_for(
        lambda: (
            admin.get_or_none("apps/v1", "Deployment", "tiny", ns) is None
            and admin.get_or_none("v1", "Service", "tiny", ns) is None
            and not admin.list("v1", "Pod", ns, label_selector=SELECTOR)
        ),
        within=120,
        what="the Deployment, Service and pods of the deleted service gone",
    )
    assert admin.get_or_none("v1", "PersistentVolumeClaim", CACHE_PVC_NAME, ns) is not None
    assert admin.get_or_none(API, "Model", "tiny", ns) is not None
    assert requests_by_code(node_cluster).get("403", 0) == 0
