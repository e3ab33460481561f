"""`llmkube router`'s command line: every flag with its environment variable and default (the
controller's Deployment sets the name and namespace; everything else has a default)."""

import argparse
import os

from llmkube.flags import add_kubeconfig_flag, add_logging_flags
from llmkube.plan.router.wake import DEFAULT_ACTIVITY_INTERVAL, DEFAULT_WAKE_QUEUE, DEFAULT_WAKE_TIMEOUT
from llmkube.router.http import Limits


def add_router_flags(parser: argparse.ArgumentParser) -> None:
    env = os.environ.get
    parser.add_argument(
        "--model-router",
        default=env("LLMKUBE_MODEL_ROUTER", ""),
        help="the ModelRouter this router serves [LLMKUBE_MODEL_ROUTER]",
    )
    parser.add_argument(
        "--namespace",
        default=env("POD_NAMESPACE", ""),
        help="its namespace (default: $POD_NAMESPACE, else the ServiceAccount's)",
    )
    add_kubeconfig_flag(parser)
    parser.add_argument(
        "--listen",
        default=env("LLMKUBE_ROUTER_LISTEN", ":8080"),
        help="address of the API, /healthz, /readyz and /metrics: host:port, :port (default :8080) "
        "[LLMKUBE_ROUTER_LISTEN]",
    )
    parser.add_argument(
        "--secrets-dir",
        default=env("LLMKUBE_ROUTER_SECRETS_DIR", "/var/run/llmkube"),
        help="where the Secrets the spec names are mounted: credentials/<secret>/<key> and "
        "api-keys/<secret>/<client> (default /var/run/llmkube) [LLMKUBE_ROUTER_SECRETS_DIR]",
    )
    parser.add_argument(
        "--external-hosts",
        default=env("LLMKUBE_ROUTER_EXTERNAL_HOSTS", ""),
        metavar="HOST[,HOST...]",
        help="hosts a backend with credentials may lead to besides its provider's own (https://"
        "api.openai.com, https://api.anthropic.com); a spec sending a key anywhere else is refused. "
        "The controller sets it from its --router-external-hosts [LLMKUBE_ROUTER_EXTERNAL_HOSTS]",
    )
    parser.add_argument(
        "--shutdown-grace",
        type=float,
        default=float(env("LLMKUBE_ROUTER_SHUTDOWN_GRACE", "30")),
        help="seconds requests in flight get to finish after SIGTERM (default 30)",
    )
    parser.add_argument(
        "--stream-idle-timeout",
        type=float,
        default=float(env("LLMKUBE_ROUTER_STREAM_IDLE_TIMEOUT", "600")),
        help="seconds a backend may stay silent in the middle of an answer before it is cut off "
        "(default 600)",
    )
    parser.add_argument(
        "--endpoint-wait",
        type=float,
        default=float(env("LLMKUBE_ROUTER_ENDPOINT_WAIT", "30")),
        help="seconds a request nothing else can serve waits for an InferenceService backend with no "
        "ready pod to get one (a Recreate rollout between its pods), at most its header timeout; 0: "
        "answer 503 at once (default 30) [LLMKUBE_ROUTER_ENDPOINT_WAIT]",
    )
    parser.add_argument(
        "--wake-timeout",
        type=float,
        default=float(env("LLMKUBE_ROUTER_WAKE_TIMEOUT", str(DEFAULT_WAKE_TIMEOUT))),
        help="seconds a request for an InferenceService scaled to zero waits for it to wake (a pod "
        "started and its model loaded), at most its header timeout; 0: answer 503 (default "
        f"{DEFAULT_WAKE_TIMEOUT:g}) [LLMKUBE_ROUTER_WAKE_TIMEOUT]",
    )
    parser.add_argument(
        "--wake-queue",
        type=int,
        default=int(env("LLMKUBE_ROUTER_WAKE_QUEUE", str(DEFAULT_WAKE_QUEUE))),
        help="requests held at once for one waking InferenceService; one more is answered 503 with "
        f"Retry-After (default {DEFAULT_WAKE_QUEUE}) [LLMKUBE_ROUTER_WAKE_QUEUE]",
    )
    parser.add_argument(
        "--activity-interval",
        type=float,
        default=float(env("LLMKUBE_ROUTER_ACTIVITY_INTERVAL", str(DEFAULT_ACTIVITY_INTERVAL))),
        help="seconds between two writes of an InferenceService's last-request time by this router "
        "(scale to zero's idle clock; none while there is no traffic; default "
        f"{DEFAULT_ACTIVITY_INTERVAL:g}) [LLMKUBE_ROUTER_ACTIVITY_INTERVAL]",
    )
    limits = Limits()
    parser.add_argument(
        "--max-connections",
        type=int,
        default=int(env("LLMKUBE_ROUTER_MAX_CONNECTIONS", str(limits.max_connections))),
        help="client connections open at once; one more is answered 503 and closed (default "
        f"{limits.max_connections}) [LLMKUBE_ROUTER_MAX_CONNECTIONS]",
    )
    parser.add_argument(
        "--max-connections-per-client",
        type=int,
        default=int(env("LLMKUBE_ROUTER_MAX_CONNECTIONS_PER_CLIENT", str(limits.max_connections_per_client))),
        help="of them from one client address; 0: no cap of its own (raise it behind an ingress, whose "
        f"address every client shares; default {limits.max_connections_per_client}) "
        "[LLMKUBE_ROUTER_MAX_CONNECTIONS_PER_CLIENT]",
    )
    parser.add_argument(
        "--head-timeout",
        type=float,
        default=float(env("LLMKUBE_ROUTER_HEAD_TIMEOUT", str(limits.head_timeout))),
        help=f"seconds a request's head may take from its first byte (default {limits.head_timeout:g}) "
        "[LLMKUBE_ROUTER_HEAD_TIMEOUT]",
    )
    parser.add_argument(
        "--write-timeout",
        type=float,
        default=float(env("LLMKUBE_ROUTER_WRITE_TIMEOUT", str(limits.write_timeout))),
        help="seconds a client that reads nothing may keep its full socket buffer full before it is cut "
        f"and its backend request cancelled (default {limits.write_timeout:g}) "
        "[LLMKUBE_ROUTER_WRITE_TIMEOUT]",
    )
    parser.add_argument(
        "--body-budget",
        type=int,
        default=int(env("LLMKUBE_ROUTER_BODY_BUDGET", str(limits.body_budget))),
        help="bytes all request bodies in flight may hold together, with what parsing them costs; a "
        f"request that does not fit now is answered 503 (default {limits.body_budget}: "
        "docs/router.md says how it is sized with the pod's memory) [LLMKUBE_ROUTER_BODY_BUDGET]",
    )
    parser.add_argument(
        "--loop",
        choices=("auto", "uvloop", "asyncio"),
        default=env("LLMKUBE_ROUTER_LOOP", "auto"),
        help="event loop: auto (uvloop when installed, as in the image), uvloop, asyncio "
        "(default auto) [LLMKUBE_ROUTER_LOOP]",
    )
    add_logging_flags(parser)
