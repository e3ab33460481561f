"""`llmkube router`'s command line: every flag with its environment variable and default (the
controller's Deployment sets the name and namespace; everything else has a default)."""

import argparse
import os

from llmkube.flags import add_kubeconfig_flag, add_logging_flags


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
        "--loop",
        choices=("auto", "uvloop", "asyncio"),
        default=env("LLMKUBE_ROUTER_LOOP", "auto"),
        help="event loop: auto (uvloop when installed, as in the image), uvloop, asyncio "
        "(default auto) [LLMKUBE_ROUTER_LOOP]",
    )
    add_logging_flags(parser)
