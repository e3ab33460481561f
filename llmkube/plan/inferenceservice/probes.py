"""Container probes, the reference operator's: the same timings for every runtime, HTTP `/health`
or TCP on the container port, each replaced wholesale by its `probeOverrides` entry when given."""

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import ProbeOverrides
from llmkube.plan.inferenceservice.runtimes.base import ProbeKind

HEALTH_PATH = "/health"
# (period, timeout, failureThreshold). Startup allows 180 x 10 s = 30 minutes for the model to load.
_TIMINGS = {"startup": (10, 5, 180), "liveness": (15, 5, 3), "readiness": (10, 5, 3)}


def default_probe(kind: ProbeKind, port: int, which: str) -> KubeObject:
    period, timeout, failures = _TIMINGS[which]
    handler: KubeObject = (
        {"httpGet": {"path": HEALTH_PATH, "port": port}} if kind == "http" else {"tcpSocket": {"port": port}}
    )
    return {**handler, "periodSeconds": period, "timeoutSeconds": timeout, "failureThreshold": failures}


def container_probes(kind: ProbeKind, port: int, overrides: ProbeOverrides | None) -> KubeObject:
    """`{startupProbe, livenessProbe, readinessProbe}` for the container."""
    chosen = {
        "startup": overrides.startup if overrides else None,
        "liveness": overrides.liveness if overrides else None,
        "readiness": overrides.readiness if overrides else None,
    }
    return {
        f"{which}Probe": chosen[which] if chosen[which] is not None else default_probe(kind, port, which)
        for which in _TIMINGS
    }
