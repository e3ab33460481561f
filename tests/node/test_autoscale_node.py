"""Autoscaling on real llama.cpp metrics, end to end on the real node: llama-server `--metrics` ->
Prometheus (the shipped scrape job) -> prometheus-adapter (the shipped rule, registered as
v1beta1.custom.metrics.k8s.io) -> the HorizontalPodAutoscaler `spec.autoscaling` creates, on the
planner's default llama.cpp metric. Load from `llmkube benchmark` scales the tiny service from 1 to
2 replicas, the new one serves only once Ready (no request of the benchmark fails), the service's
status shows desired against ready, and without load it goes back to minReplicas (the node tier's
controller-manager waits 20 s instead of 5 minutes before it scales down: llmkube_testing/node.py)."""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from conftest import ModelSource
from llmkube_testing.autoscale_scenario import (
    Load,
    autoscaled_spec,
    benchmark_levels,
    hpa_averages,
    ready_pods,
    replica_status,
    selector,
    start_benchmark,
    tokens_predicted,
)
from llmkube_testing.metrics_stack import MetricsStack, pods_metric_path
from llmkube_testing.node import NodeCluster
from llmkube_testing.tiny_service import chat_request, tiny_llamacpp
from node_support import TIMINGS, Stopwatch, eventually_http, namespace_gone_after, wait_for

from llmkube.plan.inferenceservice.runtimes.llamacpp import DEFAULTS as LLAMACPP

pytestmark = pytest.mark.tools  # Prometheus and prometheus-adapter, from hack/build-tools.sh

NAME = "scaled"
SELECTOR = selector(NAME)


@dataclass(frozen=True)
class Scenario:
    spec: dict[str, Any]
    load: Load
    metric: str  # what the HPA must scale on
    target: float  # its average value per pod


SCENARIOS = {
    # The planner's default for llama.cpp, llamacpp:requests_processing at 2 per pod: 4 slots per
    # server, so one pod's 4 answers in flight are twice the target; eight streams keep every slot
    # of two replicas busy.
    "default-metric": Scenario(
        autoscaled_spec(slots=4, max_replicas=2), Load(concurrency=8, seconds=45), LLAMACPP.hpa_metric, 2
    ),
    # A metric the user names: the requests waiting for a slot, 1 per pod, on servers of one slot
    # (where requests_processing can never pass 1). Four streams: three waiting on one pod.
    "named-metric": Scenario(
        autoscaled_spec(
            slots=1,
            max_replicas=2,
            metrics=[{"type": "Pods", "name": "llamacpp:requests_deferred", "targetAverageValue": "1"}],
        ),
        Load(concurrency=4, seconds=45),
        "llamacpp:requests_deferred",
        1,
    ),
}


@pytest.fixture(scope="module")
def metrics_stack(node_cluster: NodeCluster) -> Iterator[MetricsStack]:
    with MetricsStack(node_cluster) as stack:
        yield stack


@pytest.fixture
def scaled_namespace(node_cluster: NodeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """node_namespace, waiting until the namespace is gone (one still terminating makes the
    controller's writes there refused, which the zero-403 checks of other modules count)."""
    yield from namespace_gone_after(node_cluster, request, within=120)


@pytest.mark.parametrize("scenario", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_load_scales_one_to_two_and_back(
    node_cluster: NodeCluster,
    controller: str,
    model_source: ModelSource,
    metrics_stack: MetricsStack,
    scaled_namespace: str,
    scenario: Scenario,
) -> None:
    admin, ns, load_shape, metric = node_cluster.admin(), scaled_namespace, scenario.load, scenario.metric
    objects = tiny_llamacpp(ns, NAME, model_source.url(), **scenario.spec)
    node_cluster.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
    (first,) = wait_for(
        lambda: (found := ready_pods(node_cluster, ns, NAME)) and len(found) == 1 and found,
        within=300,
        what="one Ready pod",
    )
    service = admin.get("v1", "Service", NAME, ns)
    base_url = f"http://{service['spec']['clusterIP']}:8080"
    eventually_http(node_cluster, f"{base_url}/v1/chat/completions", chat_request())
    hpa = admin.get("autoscaling/v2", "HorizontalPodAutoscaler", NAME, ns)
    assert [m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]] == [metric]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 2)

    # The chain answers before any load: the pod's value, as the HPA controller asks for it.
    path = pods_metric_path(ns, metric, SELECTOR)
    idle = wait_for(
        lambda: (found := metrics_stack.custom_metric(path)) and found.get("items") and found,
        within=90,
        what=f"{path} served by prometheus-adapter",
    )
    assert [(i["describedObject"]["name"], i["value"]) for i in idle["items"]] == [
        (first["metadata"]["name"], "0")
    ]

    watch = Stopwatch()
    load = start_benchmark(node_cluster, base_url, load_shape)
    seen: set[tuple[int, int]] = set()
    averages: list[float] = []  # what the HPA read of the metric, per pod
    try:

        def second_serving() -> dict[str, Any] | None:
            seen.add(replica_status(node_cluster, ns, NAME))
            averages.extend(hpa_averages(node_cluster, ns, NAME))
            old = first["metadata"]["name"]
            new = [p for p in ready_pods(node_cluster, ns, NAME) if p["metadata"]["name"] != old]
            if new and tokens_predicted(node_cluster, new[0]) > 0:
                return new[0]
            assert load.poll() is None, "the benchmark ended before a second replica served"
            return None

        second = wait_for(
            second_serving, within=load_shape.seconds, what="a second replica serving", interval=0.5
        )
        TIMINGS[f"autoscale {metric}: load start -> second replica serving (s)"] = watch.seconds()
        # The status follows: two desired and two ready; the adapter serves both pods' values.
        wait_for(lambda: replica_status(node_cluster, ns, NAME) == (2, 2), within=30, what="status 2 of 2")
        # (The adapter finds a new pod's series at its next re-list, every 5 s here.)
        both = {first["metadata"]["name"], second["metadata"]["name"]}

        def served_names() -> set[str]:
            served = metrics_stack.custom_metric(path) or {}
            return {i["describedObject"]["name"] for i in served.get("items") or ()}

        wait_for(lambda: served_names() == both, within=30, what=f"{path} serving both pods")
        (level,) = benchmark_levels(load, timeout=load_shape.seconds + 60)
    finally:
        if load.poll() is None:
            load.kill()
            load.wait()
    stopped = Stopwatch()
    # Every request of the benchmark was answered, through the scale-up: the new replica took
    # traffic only once Ready (a llama-server still loading answers 503).
    assert level["errors"] == {} and level["requests"] > 0, level
    assert tokens_predicted(node_cluster, second) > 0 and tokens_predicted(node_cluster, first) > 0
    # While the new pod started, the status said so: two desired, one ready.
    assert (2, 1) in seen, seen
    # It scaled because the metric rose past its target per pod.
    assert max(averages) > scenario.target, averages

    # No load: the metric falls to 0, and after the (shortened) window the HPA goes back to min.
    wait_for(
        lambda: (
            replica_status(node_cluster, ns, NAME) == (1, 1) and len(ready_pods(node_cluster, ns, NAME)) == 1
        ),
        within=150,
        what="back to minReplicas (status 1 desired, 1 ready)",
        interval=1,
    )
    TIMINGS[f"autoscale {metric}: load stop -> back to minReplicas (s)"] = stopped.seconds()
    TIMINGS[f"autoscale {metric}: benchmark requests, all answered"] = level["requests"]
    deployment = admin.get("apps/v1", "Deployment", NAME, ns)
    assert deployment["spec"]["replicas"] == 1
    wait_for(
        lambda: len(admin.list("v1", "Pod", ns, label_selector=SELECTOR)) == 1,
        within=60,
        what="the scaled-down pod gone",
    )
