"""Registers llmkube's controllers with a host (the Manager): `await Manager(cfg).run(setup)`."""

from dataclasses import dataclass, field
from functools import partial

from llmkube.controllers.gpuquota import GPUQuotaController
from llmkube.controllers.host import ControllerHost
from llmkube.controllers.inferenceservice import InferenceServiceController
from llmkube.controllers.metal_services import MetalServicesController
from llmkube.controllers.metrics import default_metrics
from llmkube.controllers.model import ModelController
from llmkube.controllers.modelrouter import ModelRouterController
from llmkube.controllers.priorityclass import PriorityClassController
from llmkube.controllers.worker_counts import DEFAULT_WORKERS, model_workers_for
from llmkube.plan.inferenceservice.cache_pvc import cache_pvc_intent
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.model.decision import ModelPlanConfig
from llmkube.plan.model.egress import EgressConfig
from llmkube.plan.router.objects import RouterPlanConfig


@dataclass(frozen=True)
class ControllersConfig:
    operator: OperatorConfig = field(default_factory=OperatorConfig)
    model: ModelPlanConfig = field(default_factory=ModelPlanConfig)
    isvc_workers: int = DEFAULT_WORKERS
    model_workers: int = model_workers_for(DEFAULT_WORKERS)
    #: disk bandwidth cap of one model copy into the cache (None: no cap)
    model_copy_bytes_per_second: float | None = None
    #: --manage-priority-classes: False leaves the five classes to the installer (never written)
    manage_priority_classes: bool = True
    #: where Models' http(s) sources may be fetched from (--model-source-allowed-hosts, --service-cidr,
    #: --pod-cidr); the default refuses loopback, link-local, metadata and the cluster's own networks
    model_egress: EgressConfig = field(default_factory=EgressConfig)
    #: the ModelRouters' pods (--router-image)
    router: RouterPlanConfig = field(default_factory=RouterPlanConfig)
    #: the controller's own namespace (its leader-election namespace, $POD_NAMESPACE): where the
    #: ConfigMap of metal Services is, which the host agents' admission policy reads
    controller_namespace: str = "llmkube-system"


@dataclass
class Controllers:
    inference_services: InferenceServiceController
    models: ModelController
    #: None when the installer owns the classes (--manage-priority-classes=false)
    priority_classes: PriorityClassController | None
    model_routers: ModelRouterController
    metal_services: MetalServicesController
    gpu_quotas: GPUQuotaController


def setup_controllers(host: ControllerHost, config: ControllersConfig) -> Controllers:
    metrics = default_metrics()
    inference_services = InferenceServiceController(host, config.operator, metrics, config.isvc_workers)
    return Controllers(
        inference_services=inference_services,
        models=ModelController(
            host,
            config.model,
            metrics,
            config.model_workers,
            copy_bytes_per_second=config.model_copy_bytes_per_second,
            egress=config.model_egress,
            cache_claim=partial(cache_pvc_intent, config=config.operator),
        ),
        priority_classes=PriorityClassController(host) if config.manage_priority_classes else None,
        model_routers=ModelRouterController(host, config.router),
        metal_services=MetalServicesController(host, config.controller_namespace),
        gpu_quotas=GPUQuotaController(host, inference_services.quota_gate),
    )
