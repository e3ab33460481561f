"""The whole operator, in-process, against the full local control plane.

The controller runs as the static identity named like its ServiceAccount, bound to nothing but
`manifests/rbac/`, so every test also proves the RBAC is enough (the 403 count must stay zero).
"""

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

# The host agent tests' fixtures (tests/e2e/test_agent*.py).
from agent_fixtures import address, binary, files, identity, start_agent  # noqa: F401
from e2e_support import RunningController
from llmkube_testing.controller_harness import controller_running
from llmkube_testing.hfhub import HubState, running_hub
from llmkube_testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube_testing.rest import load_yaml_documents
from router_gateway import ALLOWED as ROUTER_GATEWAY

from llmkube.api.crds import all_crds
from llmkube.controllers.permissions import PERMISSIONS, granted
from llmkube.controllers.setup import ControllersConfig
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.model.decision import ModelPlanConfig
from llmkube.plan.model.egress import EgressConfig, parse_allowed_hosts
from llmkube.plan.router.objects import RouterPlanConfig
from llmkube.plan.tenancy import TenancyPolicy

ROOT = Path(__file__).resolve().parents[2]


def install_operator(cluster: ClusterHandle) -> None:
    docs: list[dict[str, Any]] = list(all_crds())
    docs += load_yaml_documents(ROOT / "manifests" / "manager" / "namespace.yaml")
    # The session's controller owns the PriorityClasses (--manage-priority-classes, the default).
    for rbac in (ROOT / "manifests" / "rbac", ROOT / "manifests" / "rbac" / "priorityclass-writer"):
        for path in sorted(rbac.glob("*.yaml")):
            if path.name != "kustomization.yaml":
                docs += load_yaml_documents(path)
    # The host agents' policy as shipped: every agent test runs under it (its identity and no other
    # is held to the slices of metal Services; the other policies are the admission tests').
    docs += load_yaml_documents(ROOT / "manifests" / "admission" / "agent_endpointslices_policy.yaml")
    apply_manifests(cluster, docs)


@pytest.fixture(scope="session")
def hf_hub() -> Iterator[HubState]:
    """The session's Hugging Face Hub stand-in, on loopback: the controller's --hf-endpoint and the
    host agents' (tests add repositories of their own names)."""
    with running_hub() as state:
        yield state


@pytest.fixture(scope="session")
async def operator(
    full_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory, hf_hub: HubState
) -> AsyncIterator[RunningController]:
    install_operator(full_cluster)
    assert full_cluster.controller_kubeconfig is not None, "the e2e suite needs the local control plane"
    model_cache = tmp_path_factory.mktemp("model-cache")
    # Local-path Models may come from the tests' temporary directories (--model-local-roots), in the
    # namespaces of tests marked local_sources.
    roots = (str(tmp_path_factory.getbasetemp()),)
    # NodePort too, as an admin of a cluster where node ports are fine (tests change a Service's
    # type); LoadBalancer stays refused (tests/e2e/test_tenant_isolation.py).
    tenancy = TenancyPolicy(
        local_source_roots=roots,
        allowed_service_types=frozenset({"ClusterIP", "NodePort"}),
        allowed_priority_classes=frozenset({"team-gold"}),
    )
    config = ControllersConfig(
        # hf:// files come from the session's Hub stand-in (loopback, allowed below), never the Hub.
        operator=OperatorConfig(hf_endpoint=hf_hub.base, tenancy=tenancy),
        # ModelRouters are held to the same allowances; their keys may go to the providers' hosts
        # and to one stand-in gateway (tests/e2e/test_router_tenancy.py).
        router=RouterPlanConfig(tenancy=tenancy, external_hosts=parse_allowed_hosts(ROUTER_GATEWAY)),
        model=ModelPlanConfig(cache_path=str(model_cache), local_source_roots=roots, hf_endpoint=hf_hub.base),
        isvc_workers=4,
        model_workers=2,
        # The tests serve model files from loopback HTTP servers, which the default policy refuses
        # (--model-source-allowed-hosts=127.0.0.1); the API server's own endpoint stays refused.
        model_egress=EgressConfig(allowed_hosts=parse_allowed_hosts("127.0.0.1")),
    )
    async with controller_running(
        full_cluster.controller_kubeconfig,
        config,
        metrics_bind_address="127.0.0.1:0",
        health_bind_address="127.0.0.1:0",
    ) as harness:
        running = RunningController(harness, full_cluster, model_cache)
        yield running
    # A 403 for new content in a namespace being deleted (a test's namespace, deleted while one of
    # its services was reconciled) is the API's lifecycle, not RBAC; every other 403 is RBAC's.
    forbidden = running.requests.rbac_refusals()
    assert not forbidden, f"the controller was refused something its RBAC should grant: {forbidden}"
    # Everything the controller asked for in the whole e2e run is in the list its roles are made of.
    used = running.requests.used()
    assert not used - granted(PERMISSIONS), (
        f"not in llmkube.controllers.permissions: {used - granted(PERMISSIONS)}"
    )
