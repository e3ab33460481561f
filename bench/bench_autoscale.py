"""Autoscaling on real llama.cpp metrics, timed: the node tier (a real kubelet) with the controller of
`manifests/` (the node test's overlay), Prometheus and prometheus-adapter on the shipped scrape job
and adapter rule (llmkube_testing/metrics_stack.py), a tiny llama.cpp service with
`spec.autoscaling` on the planner's default metric (llamacpp:requests_processing, target 2 per pod).

1. Throughput of one replica (no autoscaling, `--parallel 16`): `llmkube benchmark` at 1, 4 and 16
   concurrent streams through its Service.
2. Scale-up: `--streams` concurrent streams (every slot of two replicas busy) from load start: the
   HPA wanting more, the second replica Ready, the second replica serving (its own token counter
   moves), N replicas Ready; failed requests of that load.
3. Scale-down: the load stops, one stream goes on (below the target: the HPA scales down, and
   requests are in flight while a replica goes): time back to minReplicas (status 1 desired, 1
   ready), failed requests of that stream. The node tier's controller-manager waits 20 s of lower
   recommendations (5 min by default).

Needs root and the node tier's prerequisites (make node-prereqs, make tools).
The scaled service drains (`inference.llmkube.dev/rollout: drain`) unless `--rollout immediate`:
without it a pod the HPA removes cuts the request it is answering.

Usage: .venv/bin/python bench/bench_autoscale.py [--max-replicas 2] [--streams 8] [--load-seconds 90]
       [--rollout drain|immediate]
Prints one JSON object and saves it to bench/results/autoscale-<time>.json.
"""

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from scale_support import machine_info, save_result

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from llmkube_testing.autoscale_scenario import (  # noqa: E402
    Load,
    autoscaled_spec,
    benchmark_levels,
    ready_pods,
    replica_status,
    start_benchmark,
    tokens_predicted,
)
from llmkube_testing.metrics_stack import MetricsStack, pods_metric_path  # noqa: E402
from llmkube_testing.node import NodeCluster  # noqa: E402
from llmkube_testing.rest import KubeRest, condition_true, wait_until  # noqa: E402
from llmkube_testing.tiny_service import model_server, model_url, write_model_files  # noqa: E402
from llmkube_testing.tiny_service import tiny_llamacpp as tiny  # noqa: E402

from llmkube.plan.inferenceservice.drain import (  # noqa: E402
    DRAIN_VALUE,
    IMMEDIATE_VALUE,
    ROLLOUT_ANNOTATION,
)

OVERLAY = REPO / "tests" / "node" / "overlay"
MODELS = "tiny-models"
NAMESPACE = "bench-autoscale"
METRIC = "llamacpp:requests_processing"
STARTED = time.monotonic()


def say(what: str) -> None:
    """A progress line on stderr (the result is the JSON on stdout)."""
    print(f"[bench-autoscale {time.monotonic() - STARTED:6.1f} s] {what}", file=sys.stderr, flush=True)


def deployment_ready(admin: KubeRest, name: str, namespace: str) -> bool:
    found = admin.get_or_none("apps/v1", "Deployment", name, namespace)
    return found is not None and condition_true(found, "Available")


def deploy(node: NodeCluster, objects: list[dict[str, Any]], name: str) -> str:
    """Applies a tiny service; returns its Service URL once one pod is Ready and it answers."""
    node.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(objects))
    wait_until(lambda: ready_pods(node, NAMESPACE, name), timeout=300, interval=1, what=f"{name} Ready")
    service = node.admin().get("v1", "Service", name, NAMESPACE)
    return f"http://{service['spec']['clusterIP']}:8080"


def single_replica_throughput(node: NodeCluster, source: str) -> list[dict[str, Any]]:
    name = "single"
    url = deploy(node, tiny(NAMESPACE, name, source, parallelSlots=16, contextSize=16 * 256), name)
    levels = []
    for concurrency in (1, 4, 16):
        run = start_benchmark(node, url, Load(concurrency, seconds=15, max_tokens=64, prompt_tokens=64))
        (level,) = benchmark_levels(run, timeout=120)
        levels.append(level)
        say(f"one replica, {concurrency} streams: {level['output_tokens_per_second']:.0f} tokens/s")
    node.kubectl_run("delete", "-n", NAMESPACE, "inferenceservice", name, "--wait=true")
    wait_until(lambda: not ready_pods(node, NAMESPACE, name), timeout=120, interval=1, what=f"{name} gone")
    return levels


def scale_cycle(
    node: NodeCluster,
    stack: MetricsStack,
    source: str,
    max_replicas: int,
    streams: int,
    seconds: float,
    rollout: str,
) -> dict[str, Any]:
    name = "scaled"
    objects = tiny(NAMESPACE, name, source, **autoscaled_spec(4, max_replicas))
    for obj in objects:
        if obj["kind"] == "InferenceService":
            # A pod the HPA removes drops the requests it holds unless it drains (docs/autoscaling.md).
            obj["metadata"]["annotations"] = {ROLLOUT_ANNOTATION: rollout}
    url = deploy(node, objects, name)
    (first,) = ready_pods(node, NAMESPACE, name)
    path = pods_metric_path(NAMESPACE, METRIC, f"inference.llmkube.dev/service={name}")
    wait_until(lambda: (stack.custom_metric(path) or {}).get("items"), timeout=120, interval=1, what=path)
    marks: dict[str, float] = {}
    told: set[str] = set()
    t0 = time.monotonic()
    say(f"load: {streams} streams for {seconds:.0f} s against 1 replica (max {max_replicas})")
    load = start_benchmark(node, url, Load(streams, seconds))
    while load.poll() is None:
        now = round(time.monotonic() - t0, 1)
        desired, ready = replica_status(node, NAMESPACE, name)
        if desired >= 2:
            marks.setdefault("desired_2", now)
        pods = ready_pods(node, NAMESPACE, name)
        others = [p for p in pods if p["metadata"]["name"] != first["metadata"]["name"]]
        if others:
            marks.setdefault("second_ready", now)
            if "second_serving" not in marks and tokens_predicted(node, others[0]) > 0:
                marks["second_serving"] = round(time.monotonic() - t0, 1)
        if ready >= max_replicas:
            marks.setdefault(f"ready_{max_replicas}", now)
        for mark, at in marks.items():
            if mark not in told:
                told.add(mark)
                say(f"{mark} {at} s after the load started")
        time.sleep(0.5)
    (up,) = benchmark_levels(load, timeout=30)
    # The load stops; one stream goes on while the HPA scales down.
    t1 = time.monotonic()
    say(f"load stopped ({sum(up['errors'].values())} failed); one stream while the HPA scales down")
    trickle = start_benchmark(node, url, Load(1, seconds=75))
    back: float | None = None
    while trickle.poll() is None:
        if back is None and replica_status(node, NAMESPACE, name) == (1, 1):
            deployment = node.admin().get("apps/v1", "Deployment", name, NAMESPACE)
            if deployment["spec"]["replicas"] == 1 and len(ready_pods(node, NAMESPACE, name)) == 1:
                back = round(time.monotonic() - t1, 1)
                say(f"back to 1 replica {back} s after the load stopped")
        time.sleep(1)
    (down,) = benchmark_levels(trickle, timeout=30)
    return {
        "load": {"streams": streams, "seconds": seconds, "slots_per_replica": 4, "target_per_pod": 2},
        "rollout": rollout,
        "from_load_start_s": marks,
        "scale_up_benchmark": up,
        "load_stop_to_min_replicas_s": back,
        "scale_down_benchmark": down,
        "failed_during_scale_up": sum(up["errors"].values()),
        "failed_during_scale_down": sum(down["errors"].values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--max-replicas", type=int, default=2)
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--load-seconds", type=float, default=90)
    parser.add_argument(
        "--rollout",
        choices=(DRAIN_VALUE, IMMEDIATE_VALUE),
        default=DRAIN_VALUE,
        help=f"the scaled service's {ROLLOUT_ANNOTATION} annotation (default: %(default)s)",
    )
    args = parser.parse_args()
    with NodeCluster() as node:
        admin = node.admin()
        say("node up; installing the controller")
        node.kubectl_run("apply", "--server-side", "-k", str(OVERLAY))
        wait_until(
            lambda: deployment_ready(admin, "llmkube-controller", "llmkube-system"),
            timeout=240,
            interval=1,
            what="controller",
        )
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": MODELS}})
        for obj in model_server(MODELS, write_model_files(node.workdir / "model-files")):
            admin.apply(obj)
        wait_until(lambda: deployment_ready(admin, "tiny-model-server", MODELS), timeout=120, what="models")
        source = model_url(admin.get("v1", "Service", "tiny-model-server", MODELS)["spec"]["clusterIP"])
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        with MetricsStack(node) as stack:
            say("Prometheus and prometheus-adapter up; one replica's throughput at 1, 4, 16 streams")
            throughput = single_replica_throughput(node, source)
            cycle = scale_cycle(
                node, stack, source, args.max_replicas, args.streams, args.load_seconds, args.rollout
            )
            admin.delete("v1", "Namespace", NAMESPACE)
            wait_until(
                lambda: admin.get_or_none("v1", "Namespace", NAMESPACE) is None, timeout=120, what="cleanup"
            )
        result = {
            "benchmark": "autoscale",
            "machine": machine_info(node),
            "max_replicas": args.max_replicas,
            "single_replica": [
                {
                    "concurrency": level["concurrency"],
                    "requests_per_second": level["requests_per_second"],
                    "output_tokens_per_second": level["output_tokens_per_second"],
                    "errors": level["errors"],
                }
                for level in throughput
            ],
            **cycle,
        }
    print(json.dumps(result, indent=2))
    print(f"saved to {save_result('autoscale', result)}", file=sys.stderr)


if __name__ == "__main__":
    main()
