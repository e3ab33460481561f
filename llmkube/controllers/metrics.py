"""llmkube's own metrics, the reference operator's names that dashboards query, each counting what
its name and help say, with the reference's defects fixed (docs/differences.md): the queue-depth gauge
is the number of services waiting, a phase gauge has exactly one series at 1 per object, phase
labels are spelled as status.phase, and every series of a deleted object goes.

`llmkube_reconcile_total` counts every reconcile that finished, by result, as its help says (the
reference counted only some: a service's transition into Ready, some Model paths), so it agrees
with `controller_runtime_reconcile_total` (which also splits requeues, and counts a reconcile
cancelled by its timeout as an error).

The gauges that describe the present state are computed from the caches at scrape time
(`state_metrics`); the histograms and counters here record events.
"""

import contextlib
import time

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

from llmkube.controllers.state_metrics import StateMetrics
from llmkube.kube.control import Reconciler, Result
from llmkube.kube.exposition import add_renderer
from llmkube.kube.types import ObjectKey

ISVC_CONTROLLER = "inferenceservice"
MODEL_CONTROLLER = "model"


class LLMKubeMetrics:
    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.download_duration = Histogram(
            "llmkube_model_download_duration_seconds",
            "Time spent fetching or copying a model into the controller's cache.",
            ["model", "namespace", "source_type"],
            buckets=[2.0**i for i in range(12)],
            registry=registry,
        )
        self.ready_duration = Histogram(
            "llmkube_inferenceservice_ready_duration_seconds",
            "Time from an InferenceService's creation to its first Ready.",
            ["inferenceservice", "namespace"],
            buckets=[5.0 * 2**i for i in range(10)],
            registry=registry,
        )
        self.gpu_queue_wait = Histogram(
            "llmkube_gpu_queue_wait_duration_seconds",
            "Time an InferenceService spent in WaitingForGPU before it left the queue.",
            ["inferenceservice", "namespace"],
            buckets=[10.0 * 2**i for i in range(10)],
            registry=registry,
        )
        self.reconcile_total = Counter(
            "llmkube_reconcile_total",
            "Reconciles that finished, by controller and result: success (returned, a requeue "
            "included) or error (raised, retried with backoff).",
            ["controller", "result"],
            registry=registry,
        )
        self.reconcile_duration = Histogram(
            "llmkube_reconcile_duration_seconds",
            "Duration of the reconciles counted in llmkube_reconcile_total, by controller.",
            ["controller"],
            registry=registry,
        )
        for controller in (ISVC_CONTROLLER, MODEL_CONTROLLER):
            for result in ("success", "error"):
                self.reconcile_total.labels(controller, result)
        self.state = StateMetrics()
        registry.register(self.state)  # the queue depth
        add_renderer(self.state.render, registry)  # the per-object families

    def timed(self, controller: str, reconcile: Reconciler) -> Reconciler:
        """`reconcile`, counted in llmkube_reconcile_total{controller, result} and observed in
        llmkube_reconcile_duration_seconds{controller} once it finished (a reconcile cancelled by
        a shutdown or a lost lease did not)."""
        histogram = self.reconcile_duration.labels(controller)
        succeeded = self.reconcile_total.labels(controller, "success")
        failed = self.reconcile_total.labels(controller, "error")

        async def run(key: ObjectKey) -> Result | None:
            started = time.perf_counter()
            try:
                result = await reconcile(key)
            except Exception:
                failed.inc()
                histogram.observe(time.perf_counter() - started)
                raise
            succeeded.inc()
            histogram.observe(time.perf_counter() - started)
            return result

        return run

    def forget_isvc(self, namespace: str, name: str) -> None:
        _remove(self.ready_duration, name, namespace)
        _remove(self.gpu_queue_wait, name, namespace)

    def forget_model(self, namespace: str, name: str) -> None:
        for source_type in ("local", "remote"):
            _remove(self.download_duration, name, namespace, source_type)


def _remove(metric: Gauge | Histogram | Counter, *labels: str) -> None:
    with contextlib.suppress(KeyError):  # never observed: nothing to remove
        metric.remove(*labels)


_default: LLMKubeMetrics | None = None


def default_metrics() -> LLMKubeMetrics:
    """The process-wide instance in the default registry (registered once, like controller-runtime's)."""
    global _default
    if _default is None:
        _default = LLMKubeMetrics()
    return _default
