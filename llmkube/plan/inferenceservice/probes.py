"""Container probes, the reference operator's: the same timings for every runtime, HTTP `/health`
or TCP on the container port, each replaced wholesale by its `probeOverrides` entry when given."""

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import ProbeOverrides
from llmkube.plan.inferenceservice.runtimes.base import ProbeKind

HEALTH_PATH = "/health"
# (period, timeout, failureThreshold). Startup allows 180 x 10 s = 30 minutes for the model to load.
_TIMINGS = {"startup": (10, 5, 180), "liveness": (15, 5, 3), "readiness": (10, 5, 3)}


def default_probe(kind: ProbeKind, port: int, which: str, path: str = HEALTH_PATH) -> KubeObject:
    period, timeout, failures = _TIMINGS[which]
    handler: KubeObject = (
        {"httpGet": {"path": path, "port": port}} if kind == "http" else {"tcpSocket": {"port": port}}
    )
    return {**handler, "periodSeconds": period, "timeoutSeconds": timeout, "failureThreshold": failures}


def container_probes(
    kind: ProbeKind,
    port: int,
    overrides: ProbeOverrides | None,
    paths: tuple[str, str, str] = (HEALTH_PATH, HEALTH_PATH, HEALTH_PATH),
) -> KubeObject:
    """`{startupProbe, livenessProbe, readinessProbe}` for the container; `paths` are the HTTP
    probes' (SGLang's startup and readiness ask /health_generate, which answers once it generates)."""
    by_probe = dict(zip(_TIMINGS, paths, strict=True))
    chosen = {
        "startup": overrides.startup if overrides else None,
        "liveness": overrides.liveness if overrides else None,
        "readiness": overrides.readiness if overrides else None,
    }
    return {
        f"{which}Probe": chosen[which]
        if chosen[which] is not None
        else default_probe(kind, port, which, by_probe[which])
        for which in _TIMINGS
    }
