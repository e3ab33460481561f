"""A tenant's ModelRouters, from its own kubeconfig (a ServiceAccount bound to `llmkube-editor` in
its namespace only), against the controller with its least-privilege identity and the shipped
Secret-reference admission policy: a router within what the admin allowed is deployed and serves
(the real `llmkube router`, with the arguments and the ServiceAccount the controller gave its pod,
under Pod Security "restricted"); each hostile field is refused, at `kubectl apply` where CEL can
say it (a Secret the tenant may not read), else with Failed/PolicyViolation naming the field and a
Warning Event, and nothing created or changed: a LoadBalancer endpoint, a foreign proxy image, a
credentialed backend aimed at a host of the tenant's choosing. The router that already runs keeps
serving, and never sends its key to the new host.

The session's controller (tests/e2e/conftest.py) allows ClusterIP and NodePort Services and, for
keys, the providers' hosts and one stand-in gateway (tests/e2e/router_gateway.py)."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from e2e_support import API, RunningController, condition_triple, eventually, patch, settled, status_of
from llmkube_testing.identities import service_account_kubeconfig
from llmkube_testing.openai_upstream import Upstream
from llmkube_testing.rest import KubeRest, RestError, load_yaml_documents, wait_until
from router_gateway import ADDRESS, ALLOWED, PORT
from tenant_support import Tenant, tenant_in

from llmkube.api import constants as c
from llmkube.cli import build_parser
from llmkube.plan.inferenceservice.names import service_name
from llmkube.router.command import router_settings
from llmkube.router.process import RouterProcess

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "admission" / "secret_references_policy.yaml"
SCOPE_LABEL = "llmkube-test/router-tenancy"
RBAC = "rbac.authorization.k8s.io/v1"
CHAT = "/v1/chat/completions"
KEY = "sk-gateway-key"
#: the router's objects (plan/router/objects.py), all named <router>-router-proxy
OBJECTS = (
    ("v1", "ServiceAccount"),
    (RBAC, "Role"),
    (RBAC, "RoleBinding"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
)

pytestmark = pytest.mark.skipif(ADDRESS is None, reason="this machine has no address but loopback")


@pytest.fixture(scope="module")
def secret_policy(operator: RunningController) -> Iterator[None]:
    """The shipped policy, its binding narrowed to namespaces of this module."""
    admin = operator.cluster.admin()
    docs = load_yaml_documents(POLICY)
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding")
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {SCOPE_LABEL: "on"}}}
    for doc in docs:
        admin.apply(doc)
    yield
    for doc in reversed(docs):
        admin.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])


@pytest.fixture
def tenant(operator: RunningController, full_namespace: str, tmp_path: Path, secret_policy: None) -> Tenant:
    """A namespace under the policy and Pod Security "restricted"; the tenant may read its gateway
    key (an admin granted it, by name) and not the other team's."""
    admin = operator.cluster.admin()
    labels = {SCOPE_LABEL: "on", "pod-security.kubernetes.io/enforce": "restricted"}
    patch(admin, "v1", "Namespace", full_namespace, None, {"metadata": {"labels": labels}})
    for name, key in (("gateway-key", KEY), ("team-b-key", "sk-team-b")):
        admin.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name},
                "stringData": {"LITELLM_MASTER_KEY": key},
            },
            namespace=full_namespace,
        )
    admin.create(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "read-gateway-key"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": ["gateway-key"],
                    "verbs": ["get"],
                }
            ],
        },
        namespace=full_namespace,
    )
    admin.create(
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "read-gateway-key"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-gateway-key"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": full_namespace}],
        },
        namespace=full_namespace,
    )
    found = tenant_in(operator.cluster, full_namespace, tmp_path)

    def refused_at_apply() -> bool:
        try:
            found.client.request(
                "POST",
                f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{full_namespace}/modelrouters?dryRun=All",
                router("probe", backends=[gateway("team-b-key")]),
            )
        except RestError as refused:
            return refused.status == 403
        return False

    wait_until(refused_at_apply, timeout=30, what="the Secret-reference policy to take effect")
    return found


def gateway(secret: str = "gateway-key", url: str = f"http://{ALLOWED}") -> dict[str, Any]:
    """A LiteLLM proxy with a key: litellm has no host of its own, so only the admin's list allows it."""
    return {
        "name": "gateway",
        "external": {
            "provider": "litellm",
            "model": "gateway-model",
            "url": url,
            "credentialsSecretRef": {"name": secret},
        },
    }


LOCAL = {"name": "local", "inferenceServiceRef": {"name": "tiny"}}


def router(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "backends": [LOCAL, gateway()],
        "rules": [{"name": "tiny", "match": {"models": ["tiny-*"]}, "route": {"backends": ["local"]}}],
        "defaultRoute": "gateway",
    }
    return {"apiVersion": API, "kind": c.ROUTER_KIND, "metadata": {"name": name}, "spec": {**body, **spec}}


def slice_for(service: str, address: str, port: int) -> dict[str, Any]:
    """The EndpointSlice a ready pod of the InferenceService would have (a stand-in serves it)."""
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": f"{service}-pods", "labels": {"kubernetes.io/service-name": service}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }


def versions(admin: KubeRest, name: str, namespace: str) -> dict[str, str | None]:
    """The resourceVersion of each of the router's objects (None: it does not exist)."""
    found = {}
    for api_version, kind in OBJECTS:
        obj = admin.get_or_none(api_version, kind, f"{name}-router-proxy", namespace)
        found[kind] = obj["metadata"]["resourceVersion"] if obj is not None else None
    return found


def warnings_for(admin: KubeRest, namespace: str, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in admin.list("events.k8s.io/v1", "Event", namespace)
        if e.get("type") == "Warning" and (e.get("regarding") or {}).get("name") == name
    ]


async def refused_by_policy(admin: KubeRest, namespace: str, name: str, field: str, generation: int) -> str:
    """The router's status says PolicyViolation for this generation, naming `field`, and a Warning
    Event of that reason names it too; the Ready message."""

    def judged() -> dict[str, Any] | None:
        status = status_of(admin, c.ROUTER_KIND, name, namespace)
        return status if status.get("observedGeneration") == generation else None

    status = await eventually(judged, within=60, what=f"ModelRouter {name} judged at {generation}")
    assert status["phase"] == "Failed", status
    ready, stalled = condition_triple(status, "Ready"), condition_triple(status, "Stalled")
    assert ready is not None and ready[:2] == ("False", "PolicyViolation"), ready
    assert stalled is not None and stalled[:2] == ("True", "PolicyViolation"), stalled
    assert f"{field}: " in ready[2], ready
    await eventually(
        lambda: [
            e
            for e in warnings_for(admin, namespace, name)
            if e["reason"] == "PolicyViolation" and field in e["note"]
        ],
        within=30,
        what="the PolicyViolation Event",
    )
    return ready[2]


@contextlib.asynccontextmanager
async def router_pod(
    operator: RunningController, namespace: str, name: str, workdir: Path
) -> AsyncIterator[tuple[RouterProcess, str]]:
    """`llmkube router` as the controller's Deployment runs it (its container's arguments), with the
    ServiceAccount the controller made for it and the key the kubelet would mount; it and its URL."""
    admin = operator.cluster.admin()
    deployment = admin.get("apps/v1", "Deployment", f"{name}-router-proxy", namespace)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["llmkube", "router"]
    identity = service_account_kubeconfig(
        operator.cluster.kubeconfig, namespace, f"{name}-router-proxy", workdir / "router.kubeconfig"
    )
    mounted = workdir / "secrets" / "credentials" / "gateway-key"
    mounted.mkdir(parents=True)
    (mounted / "LITELLM_MASTER_KEY").write_text(KEY)
    args = build_parser().parse_args(
        [
            "router",
            *container["args"],
            f"--namespace={namespace}",
            f"--kubeconfig={identity}",
            f"--secrets-dir={workdir / 'secrets'}",
            "--listen=127.0.0.1:0",
            "--endpoint-wait=1",
        ]
    )
    settings = router_settings(args)
    settings.drain_delay, settings.shutdown_grace, settings.handle_signals = 0.0, 5.0, False
    process = RouterProcess(settings)
    task = asyncio.get_running_loop().create_task(process.run())
    try:
        await asyncio.wait_for(process.started.wait(), 30)
        assert process.address is not None
        yield process, f"http://127.0.0.1:{process.address[1]}"
    finally:
        process.request_stop()
        await asyncio.wait_for(task, 30)


def saw(process: RouterProcess, generation: int) -> bool:
    return process.state.loaded is not None and process.state.loaded.generation == generation


async def ask(session: aiohttp.ClientSession, url: str, model: str) -> tuple[int, str]:
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
    async with session.post(url + CHAT, json=body) as answer:
        await answer.read()
        return answer.status, answer.headers.get("X-Llmkube-Backend", "")


async def test_a_tenants_router_within_policy_serves_and_each_hostile_edit_changes_nothing(
    operator: RunningController, tenant: Tenant, tmp_path: Path
) -> None:
    admin = operator.cluster.admin()
    ns = tenant.namespace
    routers = operator.controllers.model_routers.controller
    assert ADDRESS is not None
    pod = await Upstream(name="tiny-pod", host=ADDRESS).start()
    gateway_server = await Upstream(name="gateway", host=ADDRESS, port=PORT).start()
    attacker = await Upstream(name="attacker", host=ADDRESS).start()
    try:
        admin.create(slice_for(service_name("tiny"), ADDRESS, pod.port), namespace=ns)
        tenant.client.create(router("front"), namespace=ns)

        # Deployed: the pod meets the namespace's "restricted" (the ReplicaSet's pod is admitted by
        # PodSecurity and kwok runs it), and it knows where keys may go.
        def available() -> dict[str, Any] | None:
            found = admin.get_or_none("apps/v1", "Deployment", "front-router-proxy", ns)
            return found if found and (found.get("status") or {}).get("availableReplicas") else None

        deployment = await eventually(available, within=90, what="the router's Deployment available")
        assert (
            f"--external-hosts={ALLOWED}" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        )
        status = await eventually(
            lambda: (s := status_of(admin, c.ROUTER_KIND, "front", ns)).get("phase") == "Degraded" and s,
            within=60,
            what="Degraded (the InferenceService tiny itself does not exist)",
        )
        assert status["observedGeneration"] == 1
        # The tenant reads its router and the status.
        assert tenant.client.get(API, c.ROUTER_KIND, "front", ns)["status"]["phase"] == "Degraded"

        async with (
            router_pod(operator, ns, "front", tmp_path) as (process, url),
            aiohttp.ClientSession() as session,
        ):
            ready_deadline = asyncio.get_running_loop().time() + 30
            while (await ask(session, url, "tiny-1"))[0] != 200:
                assert asyncio.get_running_loop().time() < ready_deadline, "the router never served"
                await asyncio.sleep(0.2)
            assert await ask(session, url, "tiny-1") == (200, "local")
            assert await ask(session, url, "anything") == (200, "gateway")
            sent = {k.lower(): v for k, v in gateway_server.seen[-1].headers.items()}
            assert sent["authorization"] == f"Bearer {KEY}"

            await settled(routers)
            before = versions(admin, "front", ns)
            generation = 1

            # The key aimed at a host of the tenant's choosing (it may read the Secret, so the
            # admission policy lets the edit through; the controller and the router refuse it).
            elsewhere = f"http://{ADDRESS}:{attacker.port}"
            hostile = [
                ({"backends": [LOCAL, gateway(url=elsewhere)]}, "spec.backends[1].external.url"),
                ({"endpoint": {"type": "LoadBalancer"}}, "spec.endpoint.type"),
                ({"proxy": {"image": "docker.io/attacker/router:latest"}}, "spec.proxy.image"),
            ]
            for edit, field in hostile:
                generation = int(
                    patch(tenant.client, API, c.ROUTER_KIND, "front", ns, {"spec": edit})["metadata"][
                        "generation"
                    ]
                )
                message = await refused_by_policy(admin, ns, "front", field, generation)
                if field.endswith("url"):
                    assert elsewhere in message and "--router-external-hosts" in message
                await settled(routers)
                assert versions(admin, "front", ns) == before, f"{field}: a router object changed"
                # The running router saw the edit too: it refuses the one that would move its key
                # and keeps serving, and the key never reaches the other host.
                await eventually(
                    partial(saw, process, generation), within=30, what="the router to see the edit"
                )
                assert process.state.loaded is not None
                assert process.state.loaded.refused is field.endswith("url"), process.state.loaded
                assert await ask(session, url, "anything") == (200, "gateway")
                assert attacker.requests == 0
                # Back to the allowed spec (a merge patch: each edit undone field by field).
                undo = {"backends": [LOCAL, gateway()], "endpoint": None, "proxy": None}
                patch(tenant.client, API, c.ROUTER_KIND, "front", ns, {"spec": undo})

            # A Secret the tenant may not read: refused at apply, nothing stored.
            with pytest.raises(RestError) as refused:
                patch(
                    tenant.client, API, c.ROUTER_KIND, "front", ns,
                    {"spec": {"backends": [LOCAL, gateway("team-b-key")]}},
                )  # fmt: skip
            assert refused.value.status == 403
            assert 'names Secret "team-b-key"' in str(refused.value.body)

            # Recovered: the allowed spec again, Stalled False/Recovered, nothing was rebuilt.
            def recovered() -> dict[str, Any] | None:
                status = status_of(admin, c.ROUTER_KIND, "front", ns)
                stalled = condition_triple(status, "Stalled")
                return status if stalled is not None and stalled[:2] == ("False", "Recovered") else None

            status = await eventually(recovered, within=60, what="Stalled=False/Recovered")
            assert status["phase"] == "Degraded"
            await settled(routers)
            assert versions(admin, "front", ns) == before
            assert attacker.requests == 0
    finally:
        for upstream in (pod, gateway_server, attacker):
            await upstream.stop()


async def test_hostile_routers_are_refused_and_nothing_is_created(
    operator: RunningController, tenant: Tenant
) -> None:
    admin = operator.cluster.admin()
    ns = tenant.namespace
    created: dict[str, tuple[dict[str, Any], str]] = {
        "load-balancer": ({"endpoint": {"type": "LoadBalancer"}}, "spec.endpoint.type"),
        "foreign-image": (
            {
                "proxy": {
                    "image": "docker.io/attacker/router:latest",
                    "imagePullSecrets": [{"name": "gateway-key"}],
                }
            },
            "spec.proxy.image",
        ),
        "key-elsewhere": (
            {"backends": [LOCAL, gateway(url="https://collector.attacker.example/v1")]},
            "spec.backends[1].external.url",
        ),
        # openai's key to openai's host, but in the clear: refused too.
        "plain-http": (
            {
                "backends": [
                    LOCAL,
                    {
                        "name": "gateway",
                        "external": {
                            "provider": "openai",
                            "model": "m",
                            "url": "http://api.openai.com",
                            "credentialsSecretRef": {"name": "gateway-key"},
                        },
                    },
                ]
            },
            "spec.backends[1].external.url",
        ),
    }
    for name, (spec, _) in created.items():
        tenant.client.create(router(name, **spec), namespace=ns)
    for name, (_, field) in created.items():
        await refused_by_policy(admin, ns, name, field, 1)
    await settled(operator.controllers.model_routers.controller)
    for name in created:
        assert versions(admin, name, ns) == dict.fromkeys((kind for _, kind in OBJECTS), None), name

    # What CEL can say is refused at apply: every place a router names a Secret the tenant may not
    # read, and nothing is stored.
    at_apply: dict[str, dict[str, Any]] = {
        "their-key": {"backends": [LOCAL, gateway("team-b-key")]},
        "their-client-keys": {"policy": {"apiKeys": {"secretRef": {"name": "team-b-key"}}}},
        "their-pull-secret": {"proxy": {"imagePullSecrets": [{"name": "team-b-key"}]}},
    }
    for name, spec in at_apply.items():
        with pytest.raises(RestError) as refused:
            tenant.client.create(router(name, **spec), namespace=ns)
        assert refused.value.status == 403, name
        assert admin.get_or_none(API, c.ROUTER_KIND, name, ns) is None
