"""`llmkube agent`: the host agent against the configured cluster, until it is told to stop."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmkube.agent.config import AgentConfig
    from llmkube.manager import ManagerConfig

#: the agent waits for the API server as long as it takes: its servers keep serving meanwhile
FOREVER = 10 * 365 * 24 * 3600.0


def agent_config(args: argparse.Namespace) -> AgentConfig:
    from llmkube.agent import config as c
    from llmkube.agent import host
    from llmkube.apimachinery.proxy import ProxyConfig
    from llmkube.plan.agent import supervision
    from llmkube.plan.agent.memory import PressureSettings
    from llmkube.plan.agent.rollout import DrainSettings
    from llmkube.plan.model.egress import EgressConfig, parse_allowed_hosts, parse_cidrs

    def parsed(flag: str, value: str, parse: object) -> object:
        try:
            return parse(value or "")  # type: ignore[operator]
        except ValueError as invalid:
            raise c.AgentConfigError(f"{flag}: {invalid}") from None

    if args.heartbeat_interval <= 0:
        raise c.AgentConfigError(f"--heartbeat-interval: {args.heartbeat_interval} is not a positive number")
    total = host.total_memory()
    egress = EgressConfig(
        allowed_hosts=parsed(
            "--model-source-allowed-hosts", args.model_source_allowed_hosts, parse_allowed_hosts
        ),  # type: ignore[arg-type]
        service_cidrs=parsed("--service-cidr", args.service_cidr, parse_cidrs),  # type: ignore[arg-type]
        pod_cidrs=parsed("--pod-cidr", args.pod_cidr, parse_cidrs),  # type: ignore[arg-type]
        proxy=parsed(  # type: ignore[arg-type]
            "HTTPS_PROXY/HTTP_PROXY", "", lambda _: ProxyConfig.from_environ(os.environ)
        ),
    )
    return c.AgentConfig(
        name=c.agent_name(args.name) if args.name else c.default_name(),
        address=c.checked_address(args.advertise_address),
        metal=host.is_metal_host(),
        llama_server=c.find_llama_server(args.llama_server),
        namespace=args.namespace or None,
        service_selector=args.service_selector.strip(),
        cache_dir=args.model_cache_dir.expanduser().absolute(),
        state_dir=args.state_dir.expanduser().absolute(),
        local_roots=c.local_roots(args.model_local_roots or ""),
        egress=egress,
        total_memory=total,
        budget=c.budget(args.memory_budget, total),
        ports=c.server_ports(args.server_ports),
        heartbeat_interval=args.heartbeat_interval,
        supervision=supervision.Settings(startup_timeout=args.startup_timeout),
        drain=DrainSettings(drain_timeout=args.drain_timeout),
        pressure=PressureSettings(critical=args.memory_pressure_critical),
        pressure_interval=args.memory_pressure_interval,
        stop_on_exit=args.stop_on_exit,
        controller_namespace=c.namespace_name("--controller-namespace", args.controller_namespace),
        unrestricted_server_flags=c.namespaces(
            "--unrestricted-server-flags", args.unrestricted_server_flags or ""
        ),
        downloads=c.download_limits(
            args.max_model_bytes, args.download_min_speed, args.download_min_speed_time
        ),
        hf_endpoint=c.hf_endpoint(args.hf_endpoint),
    )


def manager_config(args: argparse.Namespace, config: AgentConfig) -> ManagerConfig:
    from llmkube.api.constants import AGENT_EVENT_REPORTER, AGENT_FIELD_MANAGER
    from llmkube.manager import ManagerConfig

    return ManagerConfig(
        kubeconfig=args.kubeconfig,
        namespace=config.namespace,
        workers=1,
        metrics_bind_address=args.metrics_bind_address,
        health_bind_address=args.health_probe_bind_address,
        log_level=args.log_level,
        log_format=args.log_format,
        field_manager=AGENT_FIELD_MANAGER,
        event_reporter=AGENT_EVENT_REPORTER,
        cache_sync_timeout=FOREVER,
        graceful_shutdown_timeout=15.0,
    )


def run_agent(args: argparse.Namespace) -> int:
    import asyncio

    from llmkube.agent.config import AgentConfigError
    from llmkube.kube.rest.config import ConfigError

    try:
        config = agent_config(args)
    except AgentConfigError as invalid:
        print(f"llmkube agent: {invalid}", file=sys.stderr)
        return 2
    try:
        asyncio.run(serve(args, config))
    except AgentConfigError as invalid:
        print(f"llmkube agent: {invalid}", file=sys.stderr)
        return 2
    except OSError as failed:  # a metrics or health port already in use: one line, no traceback
        print(f"llmkube agent: cannot start: {failed}", file=sys.stderr)
        return 1
    except ConfigError as unusable:
        print(f"llmkube agent: cannot connect to the cluster: {unusable}", file=sys.stderr)
        return 2
    return 0


async def serve(args: argparse.Namespace, config: AgentConfig) -> None:
    """Run the agent's Manager; the agent's own end (servers left running or stopped, sessions
    closed) is the last thing its lifetime task does."""
    import asyncio

    import structlog

    from llmkube.agent.agent import Agent
    from llmkube.agent.config import AgentConfigError
    from llmkube.kinds import INFERENCE_SERVICES
    from llmkube.kube.errors import ApiError
    from llmkube.kube.rest.transport import TransportError
    from llmkube.manager import Manager

    log = structlog.get_logger("llmkube.agent")
    manager = Manager(manager_config(args, config))

    async def setup(manager: Manager) -> None:
        if config.service_selector:
            try:
                await manager.client.list_page(
                    INFERENCE_SERVICES, config.namespace, label_selector=config.service_selector, limit=1
                )
            except ApiError as error:
                if error.status == 400:  # the API server refuses the selector itself
                    raise AgentConfigError(f"--service-selector: {error.message}") from None
                log.warning("the service selector could not be checked yet", error=str(error))
            except TransportError as error:
                log.warning("the service selector could not be checked yet", error=str(error))
        agent = Agent(manager, config)
        await agent.open()
        log.info("agent starting", **config.describe())

        async def lifetime() -> None:
            try:
                await asyncio.Event().wait()
            finally:
                await agent.close()

        manager.add_task("agent:lifetime", lifetime)

    await manager.run(setup)
