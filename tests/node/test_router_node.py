"""A ModelRouter on the real node: two tiny llama.cpp InferenceServices (`alpha` with two pods,
`beta` with one) and a router in front, deployed by the in-cluster controller in a namespace that
enforces Pod Security "restricted". The router pod runs the image (`--router-image` of the node
overlay) as its own ServiceAccount; a client pod gets real completions from both models by name,
streamed and not; one of alpha's pods is deleted while the client's traffic is in flight and no
request is lost but streams that had already started; and neither the router nor the controller
is refused anything by the API server (its audit log and the router's own counters)."""

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import router_client
import yaml
from conftest import ModelSource
from llmkube_testing.audit import read_audit
from llmkube_testing.cluster import CONTROLLER_USER
from llmkube_testing.images import CONTROLLER
from llmkube_testing.node import NodeCluster
from llmkube_testing.pytest_plugin import fresh_namespace
from llmkube_testing.rest import KubeRest, condition_true
from llmkube_testing.tiny_service import chat_request, tiny_llamacpp
from node_support import (
    API,
    TIMINGS,
    Stopwatch,
    deployment_available,
    http,
    metric_samples,
    ready_pods,
    wait_for,
)

from llmkube import __version__

ROUTER = "tiny-router"
PROXY = f"{ROUTER}-router-proxy"  # its Deployment, Service, ServiceAccount, Role (plan/router/objects.py)
ROUTER_SELECTOR = f"inference.llmkube.dev/model-router={ROUTER}"
MODELS = ("alpha", "beta")
REPLICAS = {"alpha": 2, "beta": 1}
# Two slots of 512 tokens a pod: prompts are short, answers at most 96 tokens.
SPEC: dict[str, Any] = {
    "contextSize": 1024,
    "parallelSlots": 2,
    "resources": {"cpu": "200m", "memory": "256Mi"},
}
LOAD = {"concurrency": 4, "seconds": 45, "max_tokens": 96}
#: a pod's terminationGracePeriodSeconds when the spec leaves it out (the services here do)
GRACE_SECONDS = 30
CLIENT_SOURCE = Path(router_client.__file__).read_text()
RESTRICTED = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}}


def model_router(namespace: str) -> dict[str, Any]:
    backends = [{"name": m, "tier": "local", "inferenceServiceRef": {"name": m}} for m in MODELS]
    rules = [{"name": f"to-{m}", "match": {"models": [m]}, "route": {"backends": [m]}} for m in MODELS]
    return {
        "apiVersion": API,
        "kind": "ModelRouter",
        "metadata": {"name": ROUTER, "namespace": namespace},
        "spec": {"backends": backends, "rules": rules, "proxy": {"replicas": 1}},
    }


def selector(model: str) -> str:
    return f"inference.llmkube.dev/service={model}"


@dataclass(frozen=True)
class Routed:
    namespace: str
    #: the router's Service, as a client in the cluster reaches it (the node tier has no cluster DNS)
    base: str

    def router_pod(self, admin: KubeRest) -> dict[str, Any]:
        (pod,) = ready_pods(admin, self.namespace, ROUTER_SELECTOR)
        return pod


def router_ready(admin: KubeRest, namespace: str) -> bool:
    router = admin.get(API, "ModelRouter", ROUTER, namespace)
    status = router.get("status") or {}
    return (
        status.get("phase") == "Ready"
        and status.get("observedGeneration") == router["metadata"]["generation"]
        and deployment_available(admin, PROXY, namespace)
        and all(len(ready_pods(admin, namespace, selector(m))) == n for m, n in REPLICAS.items())
    )


@pytest.fixture(scope="module")
def routed(
    node_cluster: NodeCluster, controller: str, model_source: ModelSource, request: pytest.FixtureRequest
) -> Iterator[Routed]:
    """The two services and the router, Ready; the namespace deleted, and gone, afterwards."""
    admin = node_cluster.admin()
    names: list[str] = []
    try:
        for ns in fresh_namespace(node_cluster, request):
            names.append(ns)
            # Before any pod: every pod here (the router's too) is admitted under "restricted".
            admin.request(
                "PATCH", f"/api/v1/namespaces/{ns}", RESTRICTED, content_type="application/merge-patch+json"
            )
            objects = [
                obj
                for m in MODELS
                for obj in tiny_llamacpp(ns, m, model_source.url(), replicas=REPLICAS[m], **SPEC)
            ]
            watch = Stopwatch()
            node_cluster.kubectl_run(
                "apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all([*objects, model_router(ns)])
            )
            wait_for(
                lambda ns=ns: router_ready(admin, ns), within=420, what="both services and the router Ready"
            )
            TIMINGS["router: kubectl apply 2 services + ModelRouter -> all Ready (s)"] = watch.seconds()
            service = admin.get("v1", "Service", PROXY, ns)
            port = service["spec"]["ports"][0]["port"]
            yield Routed(ns, f"http://{service['spec']['clusterIP']}:{port}")
    finally:
        for name in names:

            def gone(namespace: str = name) -> bool:
                return admin.get_or_none("v1", "Namespace", namespace) is None

            wait_for(gone, within=180, what=f"namespace {name} deleted")


def client_pod(namespace: str, name: str, plan: dict[str, Any]) -> dict[str, Any]:
    """A pod that runs router_client.py with `plan`, within "restricted", no API token."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65532,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "containers": [
                {
                    "name": "client",
                    "image": CONTROLLER.ref,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-c", CLIENT_SOURCE, json.dumps(plan)],
                    "resources": {"requests": {"cpu": "50m", "memory": "32Mi"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


def pod_log(admin: KubeRest, namespace: str, name: str) -> str:
    code, text = admin.get_text(f"/api/v1/namespaces/{namespace}/pods/{name}/log")
    return text if code == 200 else ""


def lines_of(text: str, key: str, value: str) -> list[dict[str, Any]]:
    found = []
    for line in text.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get(key) == value:
                found.append(entry)
    return found


def finished(admin: KubeRest, namespace: str, name: str, within: float) -> list[dict[str, Any]]:
    """The client pod's lines, once it exited 0."""

    def done() -> str | None:
        phase = (admin.get("v1", "Pod", name, namespace).get("status") or {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = wait_for(done, within=within, what=f"the client pod {name} to finish", interval=1)
    log = pod_log(admin, namespace, name)
    assert phase == "Succeeded", log[-3000:]
    return [json.loads(line) for line in log.splitlines() if line.startswith("{")]


def served(result: dict[str, Any], tokens: int) -> bool:
    """Answered whole: 200, every token asked for, the stream closed by [DONE]."""
    return (
        result["status"] == 200
        and result["done"]
        and not result["error"]
        and result["completion_tokens"] == tokens
        and result["backend"] == result["model"]
    )


def test_the_router_runs_from_the_image_as_its_own_account_under_restricted(
    node_cluster: NodeCluster, routed: Routed
) -> None:
    admin, ns = node_cluster.admin(), routed.namespace
    assert admin.get("v1", "Namespace", ns)["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == (
        "restricted"
    )
    router = admin.get(API, "ModelRouter", ROUTER, ns)
    status = router["status"]
    assert status["endpoint"] == f"http://{PROXY}.{ns}.svc.cluster.local:8080/v1/chat/completions"
    assert [(b["name"], b["healthy"]) for b in status["backends"]] == [("alpha", True), ("beta", True)]
    assert condition_true(router, "Ready")
    pod = routed.router_pod(admin)
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "localhost/llmkube:dev"  # the controller's --router-image
    assert container["command"] == ["llmkube", "router"]
    (state,) = pod["status"]["containerStatuses"]
    assert state["image"] in {"localhost/llmkube:dev", f"localhost/llmkube:{__version__}"}, state
    assert state["restartCount"] == 0
    # Its own ServiceAccount, whose token is projected (it watches the API with it) ...
    assert pod["spec"]["serviceAccountName"] == PROXY
    assert admin.get("v1", "ServiceAccount", PROXY, ns)["metadata"]["ownerReferences"][0]["name"] == ROUTER
    assert [v for v in pod["spec"]["volumes"] if v["name"].startswith("kube-api-access-")]
    binding = admin.get("rbac.authorization.k8s.io/v1", "RoleBinding", PROXY, ns)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": PROXY, "namespace": ns}]
    # ... hardened as "restricted" asks (the namespace admitted it under that level).
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_a_client_pod_gets_real_completions_from_both_models(
    node_cluster: NodeCluster, routed: Routed
) -> None:
    admin, ns = node_cluster.admin(), routed.namespace
    plan = {"mode": "each", "base": routed.base, "models": list(MODELS)}
    watch = Stopwatch()
    admin.create(client_pod(ns, "client-each", plan))
    lines = finished(admin, ns, "client-each", within=180)
    TIMINGS["router: client pod created -> 4 completions done (s)"] = watch.seconds()
    (models,) = [line for line in lines if line["kind"] == "models"]
    assert models["status"] == 200 and sorted(models["ids"]) == list(MODELS)
    results = [line for line in lines if line["kind"] == "result"]
    assert [(r["model"], r["stream"]) for r in results] == [(m, s) for m in MODELS for s in (False, True)]
    for result in results:
        assert served(result, 16), result
        assert result["rule"] == f"to-{result['model']}"
        if result["stream"]:
            # Events as llama-server sends them (one per change of the text: fewer than tokens),
            # relayed one by one, not gathered into one body.
            assert result["chunks"] >= 2, result
    # The same greedy answer streamed or not: the tokens of the model, passed through unchanged.
    for model in MODELS:
        whole, streamed = [r["content"] for r in results if r["model"] == model]
        assert whole == streamed and whole, (whole, streamed)


def in_flight_on(node: NodeCluster, router_pod: dict[str, Any]) -> dict[str, float]:
    text = http(node, f"http://{router_pod['status']['podIP']}:8080/metrics", timeout=5).text
    return {
        labels["endpoint"]: value
        for labels, value in metric_samples(text, "llmkube_router_in_flight_requests")
        if value > 0
    }


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_deleting_a_backend_pod_mid_traffic_loses_no_request_that_had_not_started(
    node_cluster: NodeCluster, routed: Routed
) -> None:
    admin, ns = node_cluster.admin(), routed.namespace
    router_pod = routed.router_pod(admin)
    alpha = {
        f"{p['status']['podIP']}:8080": p["metadata"]["name"]
        for p in ready_pods(admin, ns, selector("alpha"))
    }
    assert len(alpha) == 2
    plan = {"mode": "load", "base": routed.base, "models": list(MODELS), **LOAD}
    admin.create(client_pod(ns, "client-load", plan))
    # Traffic flows (a dozen answers), then one of alpha's pods with a request in flight is deleted.
    wait_for(
        lambda: len(lines_of(pod_log(admin, ns, "client-load"), "kind", "result")) >= 12,
        within=120,
        what="the client's first answers",
    )
    # The metric names endpoints by pod (/metrics never shows a pod's address); the audit lines and
    # the log by address.
    pods = {name: address for address, name in alpha.items()}
    busy_pod = wait_for(
        lambda: next((e for e in in_flight_on(node_cluster, router_pod) if e in pods), None),
        within=30,
        interval=0.05,
        what="a request in flight on one of alpha's pods",
    )
    deleted_at = time.time()
    busy = pods[busy_pod]
    admin.delete("v1", "Pod", busy_pod, ns)
    lines = finished(admin, ns, "client-load", within=float(LOAD["seconds"]) + 180)
    results = [line for line in lines if line["kind"] == "result"]
    (summary,) = [line for line in lines if line["kind"] == "summary"]
    assert summary["sent"] == len(results)
    tokens = int(LOAD["max_tokens"])
    # A stream that got its 200 had started: the router never retries it, and if the deleted pod
    # was generating it, it is cut. Every other request must have been answered whole.
    started_streams = [r for r in results if r["stream"] and r["status"] == 200]
    lost = [r for r in results if not served(r, tokens) and r not in started_streams]
    cut = [r for r in started_streams if not served(r, tokens)]
    during = [r for r in results if r["sent_at"] <= deleted_at <= r["ended_at"]]
    assert lost == [], lost
    assert during, "no request was in flight when the pod was deleted"
    assert all(r["backend"] in MODELS for r in cut), cut
    # The router's audit lines: the requests it retried on alpha's other pod, and who served what.
    router_log = pod_log(admin, ns, router_pod["metadata"]["name"])
    audit = lines_of(router_log, "msg", "router.request")
    served_by = {e["endpoint"] for e in audit}
    assert busy in served_by and (set(alpha) - {busy}) <= served_by
    # Only the deleted pod may have failed an attempt. CI once saw the pod that stayed fail one on a
    # kept-alive connection llama-server had just closed, go into quarantine, and alpha answer 503
    # until its new pod was ready (tests/unit/router/test_router_kept_alive.py).
    failures = lines_of(router_log, "msg", "attempt failed")
    assert {f["endpoint"] for f in failures} <= {busy}, failures
    retried = [e for e in audit if len(e["tried"]) > 1]
    # A request that had no answer yet from the deleted pod is sent to alpha's other pod too: none
    # waits for the kubelet to kill the deleted one at the end of its grace period (30 s), as one did
    # when the router only retried once that pod's connection broke.
    waited = [r for r in during if not r["stream"] and r["total_s"] >= GRACE_SECONDS]
    assert waited == [], waited

    whole = [r["total_s"] for r in results if not r["stream"] and served(r, tokens)]
    first = [r["first_s"] for r in results if r["stream"] and r["first_s"] is not None]
    near = [r["total_s"] for r in results if not r["stream"] and abs(r["sent_at"] - deleted_at) < 5]
    figures = {
        "requests sent": len(results),
        "in flight at the deletion": len(during),
        "lost (not started, not answered whole)": len(lost),
        "streams cut after they had started": len(cut),
        "retried by the router on another pod": len(retried),
        "non-streaming latency p50 (s)": round(percentile(whole, 0.5), 3),
        "non-streaming latency p95 (s)": round(percentile(whole, 0.95), 3),
        "non-streaming latency max (s)": round(max(whole), 3),
        "non-streaming latency within 5 s of the deletion, max (s)": round(max(near, default=0.0), 3),
        "stream time to first chunk p50 (s)": round(percentile(first, 0.5), 3),
        "stream time to first chunk p95 (s)": round(percentile(first, 0.95), 3),
        "requests/s": round(len(results) / float(LOAD["seconds"]), 1),
        "tokens/s": round(sum(r["completion_tokens"] or 0 for r in results) / float(LOAD["seconds"]), 1),
    }
    for what, value in figures.items():
        TIMINGS[f"router, one of alpha's pods deleted under load: {what}"] = value
    print("\nrouter under load, one of alpha's pods deleted:", json.dumps(figures, indent=1))

    # The replacement pod joins: the router, which watches the EndpointSlices, sends it requests.
    wait_for(
        lambda: len(ready_pods(admin, ns, selector("alpha"))) == 2, within=240, what="alpha's replacement pod"
    )
    (new_pod,) = [
        p for p in ready_pods(admin, ns, selector("alpha")) if p["metadata"]["name"] not in alpha.values()
    ]
    new = f"{new_pod['status']['podIP']}:8080"

    def new_pod_serves() -> bool:
        for i in range(16):
            body = {**chat_request(f"After the deletion, request {i}.", 4), "model": "alpha"}
            assert http(node_cluster, f"{routed.base}/v1/chat/completions", body).status == 200
        audit = lines_of(pod_log(admin, ns, router_pod["metadata"]["name"]), "msg", "router.request")
        return any(e["endpoint"] == new for e in audit)

    wait_for(new_pod_serves, within=60, interval=1, what="the replacement pod to get requests")


def test_neither_the_router_nor_the_controller_is_refused_anything(
    node_cluster: NodeCluster, routed: Routed
) -> None:
    admin, ns = node_cluster.admin(), routed.namespace
    # The router's own counters of its requests to the API server (in-cluster, with its token).
    router_pod = routed.router_pod(admin)
    text = http(node_cluster, f"http://{router_pod['status']['podIP']}:8080/metrics").text
    codes: dict[str, float] = {}
    for labels, value in metric_samples(text, "rest_client_requests_total"):
        codes[labels["code"]] = codes.get(labels["code"], 0) + value
        assert labels["host"] == "10.0.0.1:443", labels
    assert codes.get("200", 0) > 0 and codes.get("403", 0) == 0, codes
    # The API server's record: what the router's ServiceAccount asked for, and what the controller
    # did in this namespace, never refused (taken before the namespace is deleted).
    assert node_cluster.audit_log is not None
    account = f"system:serviceaccount:{ns}:{PROXY}"
    router_requests = read_audit(node_cluster.audit_log, user=account)
    # Completed requests: its lists (its watches are still open; one refused would have ended).
    asked = {(e.verb, e.resource) for e in router_requests}
    assert {("list", "modelrouters"), ("list", "endpointslices")} <= asked, asked
    # Its backends' InferenceServices too, each by name: whether one sleeps (scale to zero).
    assert asked <= {
        ("list", "modelrouters"),
        ("watch", "modelrouters"),
        ("list", "endpointslices"),
        ("watch", "endpointslices"),
        ("list", "inferenceservices"),
        ("watch", "inferenceservices"),
    }, asked
    assert [e for e in router_requests if e.code == 403] == []
    controller_requests = [
        e for e in read_audit(node_cluster.audit_log, user=CONTROLLER_USER) if e.namespace == ns
    ]
    assert any(e.resource == "roles" for e in controller_requests)
    assert [e for e in controller_requests if e.code == 403] == []
    TIMINGS["router: API requests of the router's account (audit)"] = len(router_requests)
    TIMINGS["router: controller requests in the router's namespace (audit)"] = len(controller_requests)
