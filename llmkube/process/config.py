"""From the parsed command line to the controller's configuration: the manager's (process,
leader election, endpoints) and the controllers' (planning, model sources, what tenants may ask
for). A value no cluster could use raises ValueError naming the flag."""

import argparse
import os
from collections.abc import Callable
from types import MappingProxyType
from typing import TYPE_CHECKING, TypeVar

from llmkube.controllers.worker_counts import model_workers_for

if TYPE_CHECKING:
    from llmkube.apimachinery.proxy import ProxyConfig
    from llmkube.controllers.setup import ControllersConfig
    from llmkube.manager import ManagerConfig
    from llmkube.plan.model.egress import EgressConfig
    from llmkube.plan.router.objects import RouterPlanConfig
    from llmkube.plan.tenancy import TenancyPolicy

T = TypeVar("T")


def controllers_config(args: argparse.Namespace) -> "ControllersConfig":
    from datetime import timedelta

    from llmkube.controllers.setup import ControllersConfig
    from llmkube.plan.inferenceservice.config import OperatorConfig
    from llmkube.plan.inferenceservice.images import parse_runtime_images
    from llmkube.plan.model.decision import ModelPlanConfig
    from llmkube.plan.model.local_roots import normalized_roots

    intel = os.environ.get("LLMKUBE_INTEL_GPU_RESOURCE") or "gpu.intel.com/i915"
    roots = normalized_roots((args.model_local_roots or "").split(","))
    cache_sizes = service_cache_sizes(args.service_cache_size, args.max_service_cache_size)
    egress = egress_config(args)
    proxy = download_proxy(egress)
    return ControllersConfig(
        model_egress=egress,
        operator=OperatorConfig(
            model_cache_path=args.model_cache_path,
            model_cache_size=args.model_cache_size,
            model_cache_storage_class=args.model_cache_storage_class,
            model_cache_access_mode=args.model_cache_access_mode,
            model_storage=args.model_storage,
            ephemeral_cache_size_limit=_parsed(
                "--ephemeral-cache-size-limit", args.ephemeral_cache_size_limit, _positive_quantity
            ),
            service_cache_size=cache_sizes[0],
            max_service_cache_size=cache_sizes[1],
            ca_cert_configmap=args.ca_cert_configmap,
            init_container_image=args.init_container_image,
            hf_endpoint=args.hf_endpoint,
            download_proxy=proxy,
            runtime_images=MappingProxyType(
                _parsed("--runtime-images", args.runtime_images, parse_runtime_images)
            ),
            default_fsgroup=args.default_fsgroup,
            intel_gpu_resource=intel,
            tenancy=tenancy_policy(args, roots),
            metal_heartbeat_timeout_seconds=heartbeat_timeout(args.metal_heartbeat_timeout),
        ),
        model=ModelPlanConfig(
            cache_path=args.model_cache_path,
            revalidate_interval=timedelta(seconds=args.model_revalidate_interval),
            intel_gpu_resource=intel,
            local_source_roots=roots,
            hf_endpoint=args.hf_endpoint,
            download_proxy=proxy,
            namespace_cache=bool(args.model_cache_path),
            downloader_image=args.init_container_image,
            default_fsgroup=args.default_fsgroup,
            ca_cert_configmap=args.ca_cert_configmap,
        ),
        isvc_workers=args.workers,
        model_workers=model_workers_for(args.workers),
        model_copy_bytes_per_second=args.model_copy_bytes_per_second or None,
        manage_priority_classes=args.manage_priority_classes,
        router=router_plan_config(
            args.router_image,
            tenancy_policy(args, roots),
            allowed_images=args.router_allowed_images,
            external_hosts=args.router_external_hosts,
            proxy=proxy,
        ),
        controller_namespace=args.leader_election_namespace,
    )


def router_plan_config(
    image: str,
    tenancy: "TenancyPolicy",
    *,
    allowed_images: str = "",
    external_hosts: str = "",
    proxy: "ProxyConfig | None" = None,
) -> "RouterPlanConfig":
    """--router-image, --router-allowed-images, --router-external-hosts. Raises ValueError naming
    the flag."""
    from dataclasses import replace

    from llmkube.plan.allowed_hosts import parse_allowed_hosts
    from llmkube.plan.router.objects import RouterPlanConfig

    images = _listed(allowed_images)
    if bad := [i for i in images if any(c.isspace() for c in i) or i.startswith(("-", "@", ":"))]:
        raise ValueError(f"--router-allowed-images: {', '.join(bad)}: not an image reference")
    config = RouterPlanConfig(
        tenancy=tenancy,
        allowed_images=tuple(images),
        external_hosts=_parsed("--router-external-hosts", external_hosts, parse_allowed_hosts),
    )
    if image:
        config = replace(config, image=image)
    return replace(config, egress_proxy=proxy) if proxy is not None else config


def heartbeat_timeout(seconds: float) -> float:
    if not seconds > 0:
        raise ValueError(f"--metal-heartbeat-timeout: {seconds} is not a positive number of seconds")
    return seconds


def _listed(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def tenancy_policy(args: argparse.Namespace, roots: tuple[str, ...]) -> "TenancyPolicy":
    """What tenants may ask for (plan/tenancy.py). Raises ValueError for a value no cluster has."""
    from llmkube.plan.inferenceservice.policy import SERVICE_TYPES
    from llmkube.plan.tenancy import TenancyPolicy

    service_types = _listed(args.allowed_service_types)
    unknown = [t for t in service_types if t not in SERVICE_TYPES]
    if unknown or not service_types:
        raise ValueError(
            f"--allowed-service-types: {', '.join(unknown) or 'empty'}: "
            f"want some of {', '.join(SERVICE_TYPES)}"
        )
    classes = _listed(args.allowed_priority_classes)
    if reserved := [c for c in classes if c.startswith("system-")]:
        raise ValueError(
            f"--allowed-priority-classes: {', '.join(reserved)}: system-* classes are never allowed"
        )
    from llmkube.api.isvc_additions import kube_schemas
    from llmkube.plan.tenancy import SERVICE_ACCOUNT_TOKEN

    volume_types = frozenset(_listed(args.allowed_volume_types))
    known = {*kube_schemas()["Volume"]["properties"], SERVICE_ACCOUNT_TOKEN} - {"name"}
    if unknown_types := sorted(volume_types - known):
        raise ValueError(
            f"--allowed-volume-types: {', '.join(unknown_types)}: not a volume type (e.g. emptyDir, nfs, "
            f"{SERVICE_ACCOUNT_TOKEN})"
        )
    return TenancyPolicy(
        max_pod_security=args.max_pod_security,
        allowed_priority_classes=frozenset(classes),
        default_max_priority=args.default_max_priority,
        allowed_service_types=frozenset(service_types),
        local_source_roots=roots,
        allowed_volume_types=volume_types,
        allow_control_plane=bool(args.allow_control_plane_placement),
    )


def service_cache_sizes(size: str, maximum: str) -> tuple[str, str]:
    """--service-cache-size (empty: by the Model) and --max-service-cache-size, canonical; the size
    at most the maximum."""
    from llmkube.apimachinery.quantity import parse_quantity

    most = _parsed("--max-service-cache-size", maximum, _positive_quantity)
    given = _parsed("--service-cache-size", size, _positive_quantity) if size else ""
    if given and parse_quantity(given).value > parse_quantity(most).value:
        raise ValueError(f"--service-cache-size: {size} is more than --max-service-cache-size ({maximum})")
    return given, most


def _positive_quantity(text: str) -> str:
    """A quantity above zero, canonical (QuantityError is a ValueError)."""
    from llmkube.apimachinery.quantity import canonical_quantity, parse_quantity

    if parse_quantity(text).value <= 0:
        raise ValueError(f"{text!r} must be more than zero")
    return canonical_quantity(text)


def _parsed(flag: str, value: str | None, parse: Callable[[str], T]) -> "T":
    try:
        return parse(value or "")
    except ValueError as invalid:
        raise ValueError(f"{flag}: {invalid}") from None


def egress_config(args: argparse.Namespace) -> "EgressConfig":
    """--model-source-allowed-hosts, --service-cidr, --pod-cidr; a ValueError names the flag."""
    from llmkube.apimachinery.proxy import ProxyConfig
    from llmkube.plan.model.egress import EgressConfig, parse_allowed_hosts, parse_cidrs

    return EgressConfig(
        allowed_hosts=_parsed(
            "--model-source-allowed-hosts", args.model_source_allowed_hosts, parse_allowed_hosts
        ),
        service_cidrs=_parsed("--service-cidr", args.service_cidr, parse_cidrs),
        pod_cidrs=_parsed("--pod-cidr", args.pod_cidr, parse_cidrs),
        proxy=_parsed("HTTPS_PROXY/HTTP_PROXY", "", lambda _: ProxyConfig.from_environ(os.environ)),
    )


def download_proxy(egress: "EgressConfig") -> "ProxyConfig":
    """The downloader's proxies: the controller's, with what it knows of the cluster's own addresses
    at start (`.svc`, the cluster domain, --service-cidr, --pod-cidr, the API server's Service
    address) in NO_PROXY. (What it discovers later is not: pod specs must not change with it.)"""
    from llmkube.plan.model.egress import cluster_networks, endpoints_at, proxy_bypassing_cluster

    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    return proxy_bypassing_cluster(
        egress.proxy,
        cluster_networks(egress.service_cidrs, egress.pod_cidrs),
        endpoints_at([host], 443) if host else frozenset(),
    )


def manager_config(args: argparse.Namespace) -> "ManagerConfig":
    from llmkube.kube.leader.state import LeaderElectionTiming
    from llmkube.manager import ManagerConfig

    return ManagerConfig(
        kubeconfig=args.kubeconfig,
        namespace=args.namespace or None,
        workers=args.workers,
        leader_election=args.leader_elect,
        lease_namespace=args.leader_election_namespace,
        leader_timing=LeaderElectionTiming(
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
        ),
        metrics_bind_address=args.metrics_bind_address,
        health_bind_address=args.health_probe_bind_address,
        log_level=args.log_level,
        log_format=args.log_format,
    )
