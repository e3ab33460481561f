"""`llmkube router`: the process a ModelRouter's Deployment runs (the controller's image). It watches
its ModelRouter and the EndpointSlices of its InferenceService backends, and serves one
OpenAI-compatible endpoint that routes each request by the spec's rules.

The decisions are llmkube.plan.router's; this package performs them:

* `proxy`: every request the server reads: admission's three looks, delivery, the outcome
  performed once (metrics, the budget settled, the audit line, the router's own answer);
* `delivery` (the attempts, in order, with their verdicts), `sending` (one send, the headers, the
  race for a pod that leaves), `relay` (a stream, chunk by chunk), `shadows`, `trace` (what
  delivery saw);
* `state` (what the router knows now), `watches` (its ModelRouter and the EndpointSlices),
  `health` (active probes), `upstream` (the pools, held to the egress rules), `secrets` (the
  mounted keys), `metrics`, `audit` (where audit lines go);
* `http/`: its HTTP/1.1 server and backend pool, which know nothing of routing;
* `process`, `command`, `flags`, `event_loop`: the process and its command line.

Imports the kube machinery, the process's logging and pure planning; never pydantic (the router
reads the spec as stored): its memory is what it holds for its connections. Its face (below) is
imported name by name when first used: building the command line's parser loads none of it."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.router.audit import AuditSink
    from llmkube.router.command import router_settings, run_router
    from llmkube.router.event_loop import loop_factory
    from llmkube.router.flags import add_router_flags
    from llmkube.router.health import Prober
    from llmkube.router.metrics import RouterMetrics
    from llmkube.router.process import RouterProcess, RouterSettings, error_body, http_server, metrics_page
    from llmkube.router.proxy import Proxy
    from llmkube.router.secrets import ApiKeys, SecretFiles
    from llmkube.router.state import Loaded, RouterState
    from llmkube.router.upstream import Upstreams
    from llmkube.router.watches import RouterWatches
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "command": "router_settings run_router",
            "flags": "add_router_flags",
            "process": "RouterProcess RouterSettings error_body http_server metrics_page",
            "proxy": "Proxy",
            "state": "Loaded RouterState",
            "metrics": "RouterMetrics",
            "audit": "AuditSink",
            "secrets": "ApiKeys SecretFiles",
            "upstream": "Upstreams",
            "health": "Prober",
            "watches": "RouterWatches",
            "event_loop": "loop_factory",
        },
    )
