"""`llmkube router`: serve one ModelRouter until told to stop."""

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmkube.router.process import RouterSettings

_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def _namespace(args: argparse.Namespace) -> str:
    if args.namespace:
        return str(args.namespace)
    if _SERVICE_ACCOUNT_NAMESPACE.is_file():
        return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return ""


def _listen(value: str) -> tuple[str, int]:
    host, sep, port = value.strip().rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--listen: {value!r} is not host:port or :port")
    return host.strip("[]") or "0.0.0.0", int(port)


def router_settings(args: argparse.Namespace, *, loop: str = "asyncio") -> "RouterSettings":
    """What `llmkube router ARGS` runs with (the tests run a router pod's own arguments through it).
    Raises ValueError naming the flag."""
    from llmkube.apimachinery.proxy import ProxyConfig
    from llmkube.plan.allowed_hosts import parse_allowed_hosts
    from llmkube.router.http import Limits
    from llmkube.router.process import RouterSettings

    namespace = _namespace(args)
    if not args.model_router or not namespace:
        raise ValueError("--model-router and --namespace (or $POD_NAMESPACE) are required")
    host, port = _listen(args.listen)
    try:
        external_hosts = parse_allowed_hosts(args.external_hosts or "")
    except ValueError as invalid:
        raise ValueError(f"--external-hosts: {invalid}") from None
    try:
        proxy = ProxyConfig.from_environ(os.environ)
    except ValueError as invalid:
        raise ValueError(f"HTTPS_PROXY/HTTP_PROXY: {invalid}") from None
    return RouterSettings(
        name=args.model_router,
        namespace=namespace,
        kubeconfig=args.kubeconfig,
        host=host,
        port=port,
        secrets_dir=Path(args.secrets_dir),
        shutdown_grace=args.shutdown_grace,
        stream_idle_timeout=args.stream_idle_timeout,
        endpoint_wait=max(0.0, args.endpoint_wait),
        wake_timeout=max(0.0, args.wake_timeout),
        wake_queue=max(1, args.wake_queue),
        activity_interval=max(1.0, args.activity_interval),
        external_hosts=external_hosts,
        proxy=proxy,
        limits=Limits(
            max_connections=max(0, args.max_connections),
            max_connections_per_client=max(0, args.max_connections_per_client),
            head_timeout=max(0.1, args.head_timeout),
            write_timeout=max(0.1, args.write_timeout),
            body_budget=max(1 << 20, args.body_budget),
        ),
        loop=loop,
    )


def run_router(args: argparse.Namespace) -> int:
    import asyncio

    from llmkube.kube.rest.config import ConfigError
    from llmkube.manager.logs import configure_logging
    from llmkube.router.event_loop import loop_factory
    from llmkube.router.process import RouterProcess

    try:
        settings = router_settings(args)
        loop, new_loop = loop_factory(args.loop)
        configure_logging(args.log_level, args.log_format)
    except ValueError as invalid:
        print(f"llmkube router: {invalid}", file=sys.stderr)
        return 2
    settings.loop = loop
    try:
        with asyncio.Runner(loop_factory=new_loop) as runner:
            runner.run(RouterProcess(settings).run())
    except OSError as failed:  # the port is taken: one line, no traceback
        print(f"llmkube router: cannot start: {failed}", file=sys.stderr)
        return 1
    except ConfigError as unusable:
        print(f"llmkube router: cannot connect to the cluster: {unusable}", file=sys.stderr)
        return 2
    return 0
