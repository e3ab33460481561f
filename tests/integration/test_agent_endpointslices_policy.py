"""manifests/admission/agent_endpointslices_policy.yaml on a real API server, with the host agent's
own token (its ServiceAccount bound to nothing but manifests/agent/rbac.yaml, which lets it write
EndpointSlices in every namespace) and the controller keeping the ConfigMap the policy reads.

The agent's slices are the agent's own intent (plan/agent/slices.py), written as it writes them
(server-side apply, its field manager, force). For the metal Service the controller made, create,
change and delete pass; for kube-system's DNS Service, the API server's `default/kubernetes`, a CPU
service's Service, another namespace's metal Service (its uid forged into the owner reference), a
slice without the agent's labels, and with the ConfigMap missing, each is refused with the policy's
message naming the slice and the Service. Entries someone adds to the ConfigMap by hand are undone.

A control plane of its own: the controller watches every namespace (as a cluster-wide install does),
and no other test's objects may be there.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from llmkube.api.crds import all_crds
from llmkube.controllers.setup import ControllersConfig
from llmkube.plan.agent.slices import SliceInputs, slice_intent
from llmkube.plan.agent.supervision import EndpointConditions
from llmkube.plan.inferenceservice.metal_services import METAL_SERVICES_CONFIGMAP
from llmkube.testing.cluster import LocalCluster, MissingBinaryError
from llmkube.testing.controller_harness import ControllerHarness, controller_running
from llmkube.testing.identities import service_account_kubeconfig
from llmkube.testing.rest import KubeRest, RestError, load_yaml_documents, wait_for_crds, wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "admission" / "agent_endpointslices_policy.yaml"
AGENT_RBAC = ROOT / "manifests" / "agent" / "rbac.yaml"
API = "inference.llmkube.dev/v1alpha1"
SLICES = "discovery.k8s.io/v1"
SYSTEM = "llmkube-system"
AGENT_USER = "system:serviceaccount:llmkube-system:llmkube-agent"
DENIED = "denied request: "
READY = EndpointConditions(ready=True, serving=True, terminating=False)


@dataclass
class Cluster:
    local: LocalCluster
    admin: KubeRest
    agent: KubeRest  # the host agent's own token


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    try:
        local = LocalCluster("api").start()
    except MissingBinaryError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        admin = local.admin()
        admin.apply_all(all_crds())
        wait_for_crds(admin, [crd["metadata"]["name"] for crd in all_crds()])
        admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM}})
        admin.apply_all(load_yaml_documents(AGENT_RBAC))
        admin.apply_all(load_yaml_documents(POLICY))  # as shipped
        kubeconfig = service_account_kubeconfig(
            local.kubeconfig, SYSTEM, "llmkube-agent", tmp_path_factory.mktemp("agent") / "kubeconfig"
        )
        yield Cluster(local, admin, KubeRest.from_kubeconfig(kubeconfig))
    finally:
        local.stop()


async def eventually(check: Callable[[], Any], *, within: float = 30, what: str = "condition") -> Any:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(None, lambda: wait_until(check, timeout=within, what=what))


def listed(admin: KubeRest) -> dict[str, str]:
    found = admin.get_or_none("v1", "ConfigMap", METAL_SERVICES_CONFIGMAP, SYSTEM)
    return dict((found or {}).get("data") or {})


@dataclass
class Metal:
    """A metal InferenceService `demo` in two namespaces and a CPU one `web`, their Services made by
    the controller (which runs meanwhile) and listed."""

    cluster: Cluster
    controller: ControllerHarness
    namespaces: tuple[str, str]
    uids: dict[str, str]  # "<namespace>/<service>" -> the Service's uid


def create_services(admin: KubeRest, namespace: str) -> None:
    if admin.get_or_none("v1", "Namespace", namespace) is None:
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    for obj in (
        {"kind": "Model", "metadata": {"name": "metal"}, "spec": {"source": "org/metal-model",
                                                                "hardware": {"accelerator": "metal"}}},
        {"kind": "Model", "metadata": {"name": "cpu"}, "spec": {"source": "https://models.invalid/tiny.gguf"}},
        {"kind": "InferenceService", "metadata": {"name": "demo"}, "spec": {"modelRef": "metal"}},
        {"kind": "InferenceService", "metadata": {"name": "web"}, "spec": {"modelRef": "cpu"}},
    ):  # fmt: skip
        if admin.get_or_none(API, obj["kind"], obj["metadata"]["name"], namespace) is None:
            admin.create({"apiVersion": API, **obj}, namespace=namespace)


@pytest.fixture
async def metal(cluster: Cluster) -> AsyncIterator[Metal]:
    namespaces = ("metal-a", "metal-b")
    for namespace in namespaces:
        create_services(cluster.admin, namespace)
    async with controller_running(cluster.local.kubeconfig, ControllersConfig()) as controller:
        uids = {}
        for namespace in namespaces:
            for name in ("demo", "web"):
                service = await eventually(
                    lambda n=namespace, s=name: cluster.admin.get_or_none("v1", "Service", s, n),
                    what=f"Service {namespace}/{name}",
                )
                uids[f"{namespace}/{name}"] = service["metadata"]["uid"]
        expected = {f"{ns}.demo": uids[f"{ns}/demo"] for ns in namespaces}
        await eventually(lambda: listed(cluster.admin) == expected, what="the metal Services listed")
        yield Metal(cluster, controller, namespaces, uids)


def agent_slice(
    namespace: str, service: str, uid: str, *, name: str | None = None, port: int | None = 41234
) -> dict[str, Any]:
    """What the agent `host-a` writes for `service` (its own intent), ready on its port."""
    inputs = SliceInputs(
        namespace=namespace,
        service=service,
        service_uid=uid,
        agent="host-a",
        version="test",
        address="192.0.2.10",
        port=port,
        conditions=READY if port is not None else None,
        report=None,
    )
    intent = slice_intent(inputs, datetime.now(UTC))
    if name is not None:
        intent["metadata"]["name"] = name
    return intent


def write(agent: KubeRest, obj: dict[str, Any]) -> dict[str, Any]:
    """As the agent writes its slice: server-side apply, its field manager, forced."""
    return agent.apply(obj, field_manager="llmkube-agent")


def delete(agent: KubeRest, namespace: str, name: str) -> None:
    agent.request("DELETE", agent.path_for(SLICES, "EndpointSlice", namespace, name))


def refusal(attempt: Callable[[], object]) -> tuple[int, str, str]:
    """(status, reason, the policy's message) of a refused request; fails if it was allowed."""
    try:
        attempt()
    except RestError as refused:
        assert isinstance(refused.body, dict), refused
        message = str(refused.body.get("message", ""))
        assert "ValidatingAdmissionPolicy 'llmkube-agent-endpointslice" in message, message
        return refused.status, str(refused.body.get("reason")), message.partition(DENIED)[2]
    raise AssertionError("allowed")


def not_metal(namespace: str, slice_name: str, service: str) -> str:
    return (
        f"EndpointSlice {namespace}/{slice_name}: Service {namespace}/{service} is not a Service llmkube "
        f"made for a metal InferenceService (ConfigMap {SYSTEM}/{METAL_SERVICES_CONFIGMAP}): a host agent "
        "may not add endpoints to it"
    )


def not_agents(namespace: str, slice_name: str, verb: str) -> str:
    return (
        f"EndpointSlice {namespace}/{slice_name} is not a host agent's slice (labelled "
        "llmkube.ai/managed-by=metal-agent, endpointslice.kubernetes.io/managed-by=agent.llmkube.ai and "
        f"llmkube.ai/agent): a host agent may not {verb} it"
    )


def not_agents_to_change(namespace: str, slice_name: str, service: str) -> set[str]:
    """A slice that is not an agent's, changed into one: both policies refuse it (the labels one, the
    old slice not an agent's; the listing one, its Service not listed), either may answer."""
    return {
        not_agents(namespace, slice_name, "change"),
        f"EndpointSlice {namespace}/{slice_name} (Service {namespace}/{service}) is not a host agent's "
        f"slice of a Service llmkube made for a metal InferenceService (ConfigMap {SYSTEM}/"
        f"{METAL_SERVICES_CONFIGMAP}): a host agent may not change it",
    }


def not_agents_to_delete(namespace: str, slice_name: str, service: str) -> str:
    return not_agents(namespace, slice_name, "delete")


async def test_the_agent_creates_changes_and_deletes_the_slice_of_a_metal_service(metal: Metal) -> None:
    agent, admin = metal.cluster.agent, metal.cluster.admin
    namespace = metal.namespaces[0]
    uid = metal.uids[f"{namespace}/demo"]
    created = write(agent, agent_slice(namespace, "demo", uid, port=None))  # starting: no endpoint
    assert created["metadata"]["ownerReferences"][0]["uid"] == uid
    changed = write(agent, agent_slice(namespace, "demo", uid))  # serving
    assert changed["endpoints"][0]["addresses"] == ["192.0.2.10"]
    assert changed["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]
    delete(agent, namespace, "demo-host-a")
    assert admin.get_or_none(SLICES, "EndpointSlice", "demo-host-a", namespace) is None


def dns_service(admin: KubeRest) -> dict[str, Any]:
    """kube-system's DNS Service as a cluster has it, and its slice (the EndpointSlice controller's)."""
    service = admin.get_or_none("v1", "Service", "kube-dns", "kube-system") or admin.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
            "spec": {
                "selector": {"k8s-app": "kube-dns"},
                "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
            },
        }
    )
    if admin.get_or_none(SLICES, "EndpointSlice", "kube-dns-abcde", "kube-system") is None:
        admin.create(
            {
                "apiVersion": SLICES,
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "kube-dns-abcde",
                    "namespace": "kube-system",
                    "labels": {
                        "kubernetes.io/service-name": "kube-dns",
                        "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                    },
                },
                "addressType": "IPv4",
                "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}],
                "endpoints": [{"addresses": ["10.244.0.5"], "conditions": {"ready": True}}],
            }
        )
    return service


async def test_kube_systems_dns_service_is_refused(metal: Metal) -> None:
    agent, admin = metal.cluster.agent, metal.cluster.admin
    uid = dns_service(admin)["metadata"]["uid"]
    # A slice of its own for kube-dns, exactly as an agent would write one: refused.
    assert refusal(lambda: write(agent, agent_slice("kube-system", "kube-dns", uid))) == (
        403,
        "Forbidden",
        not_metal("kube-system", "kube-dns-host-a", "kube-dns"),
    )
    # The DNS Service's own slice, taken over (the agent's labels and endpoint) or deleted: refused.
    takeover = agent_slice("kube-system", "kube-dns", uid, name="kube-dns-abcde")
    status, reason, message = refusal(lambda: write(agent, takeover))
    assert (status, reason) == (403, "Forbidden")
    assert message in not_agents_to_change("kube-system", "kube-dns-abcde", "kube-dns"), message
    assert refusal(lambda: delete(agent, "kube-system", "kube-dns-abcde")) == (
        403,
        "Forbidden",
        not_agents_to_delete("kube-system", "kube-dns-abcde", "kube-dns"),
    )
    kept = admin.get(SLICES, "EndpointSlice", "kube-dns-abcde", "kube-system")
    assert kept["endpoints"][0]["addresses"] == ["10.244.0.5"]
    assert admin.get_or_none(SLICES, "EndpointSlice", "kube-dns-host-a", "kube-system") is None


async def test_the_api_servers_own_service_is_refused(metal: Metal) -> None:
    agent, admin = metal.cluster.agent, metal.cluster.admin
    uid = admin.get("v1", "Service", "kubernetes", "default")["metadata"]["uid"]
    assert refusal(lambda: write(agent, agent_slice("default", "kubernetes", uid))) == (
        403,
        "Forbidden",
        not_metal("default", "kubernetes-host-a", "kubernetes"),
    )
    # Its slice (a cluster's controllers keep it from the API server's Endpoints; this control
    # plane runs none, so it is made here as they make it).
    if admin.get_or_none(SLICES, "EndpointSlice", "kubernetes", "default") is None:
        admin.create(
            {
                "apiVersion": SLICES,
                "kind": "EndpointSlice",
                "metadata": {
                    "name": "kubernetes",
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": "kubernetes"},
                },
                "addressType": "IPv4",
                "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
                "endpoints": [{"addresses": ["192.0.2.1"], "conditions": {"ready": True}}],
            }
        )
    ours = agent_slice("default", "kubernetes", uid, name="kubernetes")
    assert refusal(lambda: write(agent, ours))[2] in not_agents_to_change(
        "default", "kubernetes", "kubernetes"
    )
    assert refusal(lambda: delete(agent, "default", "kubernetes"))[2] == not_agents_to_delete(
        "default", "kubernetes", "kubernetes"
    )
    kept = admin.get(SLICES, "EndpointSlice", "kubernetes", "default")
    assert "llmkube.ai/agent" not in (kept["metadata"].get("labels") or {})


async def test_a_cpu_services_service_is_refused(metal: Metal) -> None:
    """llmkube's own Service, with a selector (its pods serve it): not the agents' to add to."""
    namespace = metal.namespaces[0]
    uid = metal.uids[f"{namespace}/web"]
    assert refusal(lambda: write(metal.cluster.agent, agent_slice(namespace, "web", uid))) == (
        403,
        "Forbidden",
        not_metal(namespace, "web-host-a", "web"),
    )


async def test_another_namespaces_metal_service_uid_is_refused(metal: Metal) -> None:
    """Both namespaces have a metal `demo`: a slice in one owned by the other's Service (its uid) is
    not owned by the Service it names, and a namespace without one gets nothing from the other's."""
    a, b = metal.namespaces
    forged = agent_slice(a, "demo", metal.uids[f"{b}/demo"])
    assert refusal(lambda: write(metal.cluster.agent, forged)) == (
        403,
        "Forbidden",
        f"EndpointSlice {a}/demo-host-a: its ownerReference to Service {a}/demo must carry that Service's "
        f"uid {metal.uids[f'{a}/demo']} (ConfigMap {SYSTEM}/{METAL_SERVICES_CONFIGMAP})",
    )
    admin = metal.cluster.admin
    if admin.get_or_none("v1", "Namespace", "elsewhere") is None:
        admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "elsewhere"}})
    elsewhere = agent_slice("elsewhere", "demo", metal.uids[f"{a}/demo"])
    assert refusal(lambda: write(metal.cluster.agent, elsewhere))[2] == not_metal(
        "elsewhere", "demo-host-a", "demo"
    )


async def test_a_slice_without_the_agents_labels_is_refused(metal: Metal) -> None:
    namespace = metal.namespaces[0]
    bare = agent_slice(namespace, "demo", metal.uids[f"{namespace}/demo"])
    labels = bare["metadata"]["labels"]
    for label in ("llmkube.ai/managed-by", "endpointslice.kubernetes.io/managed-by", "llmkube.ai/agent"):
        unlabelled = {
            **bare,
            "metadata": {**bare["metadata"], "labels": {k: v for k, v in labels.items() if k != label}},
        }
        assert refusal(lambda s=unlabelled: write(metal.cluster.agent, s)) == (
            403,
            "Forbidden",
            f"EndpointSlice {namespace}/demo-host-a: a host agent may write only slices labelled "
            "llmkube.ai/managed-by=metal-agent, endpointslice.kubernetes.io/managed-by=agent.llmkube.ai "
            "and llmkube.ai/agent=<its name>",
        ), label
    # The EndpointSlice controller's label: the cluster would take the slice over.
    theirs = {**labels, "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}
    claimed = {**bare, "metadata": {**bare["metadata"], "labels": theirs}}
    assert refusal(lambda: write(metal.cluster.agent, claimed))[0] == 403


async def test_a_service_listed_by_hand_is_taken_off_again(metal: Metal) -> None:
    """The ConfigMap is the controller's alone: an entry someone adds (kube-dns, with its uid) is
    removed, and the agent stays refused."""
    admin = metal.cluster.admin
    uid = dns_service(admin)["metadata"]["uid"]
    expected = listed(admin)
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": METAL_SERVICES_CONFIGMAP, "namespace": SYSTEM},
            "data": {"kube-system.kube-dns": uid},
        },
        field_manager="kubectl",
    )
    await eventually(lambda: listed(admin) == expected, what="the hand-made entry removed")
    refused = refusal(lambda: write(metal.cluster.agent, agent_slice("kube-system", "kube-dns", uid)))
    assert refused[2] == not_metal("kube-system", "kube-dns-host-a", "kube-dns")


def configmap_writes(controller: ControllerHarness) -> int:
    return sum(
        n
        for request, n in controller.requests.api_requests.items()
        if request.resource == "configmaps" and request.verb not in ("get", "list", "watch")
    )


async def test_a_restart_against_the_listed_services_writes_nothing(metal: Metal) -> None:
    await metal.controller.stop()
    async with controller_running(metal.cluster.local.kubeconfig, ControllersConfig()) as restarted:
        await restarted.idle()
        await asyncio.sleep(1)  # anything the first lists woke: reconciled
        await restarted.idle()
        assert configmap_writes(restarted) == 0
        assert restarted.mutating_requests() == 0, restarted.requests.request_counts
    assert listed(metal.cluster.admin) == {f"{ns}.demo": metal.uids[f"{ns}/demo"] for ns in metal.namespaces}


async def test_without_the_configmap_every_agent_write_is_refused_until_the_controller_makes_it(
    cluster: Cluster,
) -> None:
    """No controller runs and the ConfigMap is gone: the policy (parameterNotFoundAction: Deny)
    refuses the agent even a metal Service's slice. A controller that starts makes it again, and
    the same write passes."""
    admin, agent = cluster.admin, cluster.agent
    create_services(admin, "metal-a")
    if admin.get_or_none("v1", "ConfigMap", METAL_SERVICES_CONFIGMAP, SYSTEM) is not None:
        admin.delete("v1", "ConfigMap", METAL_SERVICES_CONFIGMAP, SYSTEM)
    service = admin.get_or_none("v1", "Service", "demo", "metal-a")
    uid = service["metadata"]["uid"] if service is not None else "0f5e0d4a-0000-4000-8000-000000000000"

    def refused_without_the_configmap() -> tuple[int, str, str] | None:
        try:
            write(agent, agent_slice("metal-a", "demo", uid))
        except RestError as error:
            body = error.body if isinstance(error.body, dict) else {}
            return error.status, str(body.get("reason")), str(body.get("message"))
        return None

    status, reason, message = await eventually(refused_without_the_configmap, what="a refusal")
    assert (status, reason) == (422, "Invalid")
    assert message.endswith(
        f"{DENIED}failed to configure binding: no params found for policy binding with `Deny` "
        "parameterNotFoundAction"
    ), message
    async with controller_running(cluster.local.kubeconfig, ControllersConfig()) as controller:
        service = await eventually(
            lambda: admin.get_or_none("v1", "Service", "demo", "metal-a"), what="Service"
        )
        uid = service["metadata"]["uid"]
        await eventually(lambda: listed(admin).get("metal-a.demo") == uid, what="the ConfigMap made again")
        await eventually(lambda: write(agent, agent_slice("metal-a", "demo", uid)), what="the write allowed")
        delete(agent, "metal-a", "demo-host-a")
        configmap_writes = sum(
            count
            for asked, count in controller.requests.api_requests.items()
            if asked.resource == "configmaps" and asked.verb in ("patch", "update")
        )
        assert configmap_writes == 1  # created once (by server-side apply), with the metal Services


async def test_without_the_configmap_nobody_elses_slices_are_touched(cluster: Cluster) -> None:
    """The API server reads a binding's parameter before its matchConditions: had the listing
    policy matched every EndpointSlice, a missing ConfigMap (a fresh install, before its first metal
    service) would refuse the EndpointSlice controller's writes and every Service of the cluster
    would lose its endpoints. Its binding selects agents' slices only: an admin (as the
    EndpointSlice controller does) creates, changes and deletes a Service's slice with the
    ConfigMap gone, while the agent is still refused."""
    admin = cluster.admin
    create_services(admin, "metal-a")
    if admin.get_or_none("v1", "ConfigMap", METAL_SERVICES_CONFIGMAP, SYSTEM) is not None:
        admin.delete("v1", "ConfigMap", METAL_SERVICES_CONFIGMAP, SYSTEM)
    await eventually(
        lambda: admin.get_or_none("v1", "ConfigMap", METAL_SERVICES_CONFIGMAP, SYSTEM) is None,
        what="the ConfigMap gone",
    )
    ordinary = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-abcde",
            "namespace": "metal-a",
            "labels": {
                "kubernetes.io/service-name": "web",
                "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.0.7"]}],
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
    }
    await eventually(lambda: admin.apply(ordinary), what="an ordinary slice created")
    admin.apply({**ordinary, "endpoints": [{"addresses": ["10.1.0.8"]}]})
    admin.delete("discovery.k8s.io/v1", "EndpointSlice", "web-abcde", "metal-a")
    with pytest.raises(RestError):
        write(cluster.agent, agent_slice("metal-a", "demo", "0f5e0d4a-0000-4000-8000-000000000000"))
