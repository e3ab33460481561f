"""The ModelRouter controller on the full control plane: a router's ServiceAccount, Role,
RoleBinding, Service and Deployment (hardened, `llmkube router`), its status from the Deployment
and its backends, no write once converged, and an invalid spec reported naming the field."""

import asyncio
from typing import Any

from e2e_support import (
    RunningController,
    eventually,
    eventually_equal,
    reconcile_now,
    settled,
    writes_quiesce,
)
from llmkube_testing.rest import KubeRest

from llmkube.api import constants as c
from llmkube.kube.types import ObjectKey
from llmkube.plan.router.permissions import role_rules

RBAC = "rbac.authorization.k8s.io/v1"


def _router(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.ROUTER_KIND,
        "metadata": {"name": name},
        "spec": {
            "backends": [
                {"name": "local", "inferenceServiceRef": {"name": "tiny"}},
                {
                    "name": "cloud",
                    "external": {
                        "provider": "openai",
                        "model": "gpt-4o-mini",
                        "credentialsSecretRef": {"name": "openai-key"},
                    },
                },
            ],
            "rules": [{"name": "tiny", "match": {"models": ["tiny-*"]}, "route": {"backends": ["local"]}}],
            "defaultRoute": "cloud",
            **spec,
        },
    }


def _status(admin: KubeRest, name: str, ns: str) -> dict[str, Any]:
    return admin.get(c.API_VERSION, c.ROUTER_KIND, name, ns).get("status") or {}


def _conditions(status: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {cond["type"]: (cond["status"], cond["reason"]) for cond in status.get("conditions") or ()}


async def test_a_model_router_becomes_its_deployment_service_and_rbac(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    routers = operator.controllers.model_routers.controller
    admin.create(_router("front"), namespace=ns)
    name = "front-router-proxy"

    deployment = await eventually(
        lambda: admin.get_or_none("apps/v1", "Deployment", name, ns), what="Deployment"
    )
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["llmkube", "router"] and "--model-router=front" in container["args"]
    assert pod["serviceAccountName"] == name
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"] for m in container.get("volumeMounts") or ()}
    # Only the Secret the spec names, and its InferenceService backend's server key (a metal
    # service's host servers ask for it; the volume is optional and empty for others).
    assert mounts == {"/var/run/llmkube/credentials/openai-key", "/var/run/llmkube/server-keys/tiny"}
    service = admin.get("v1", "Service", name, ns)
    assert service["spec"]["ports"][0]["port"] == 8080
    assert admin.get("v1", "ServiceAccount", name, ns)["metadata"]["ownerReferences"][0]["name"] == "front"
    assert admin.get(RBAC, "Role", name, ns)["rules"] == role_rules("front", ["tiny"])
    binding = admin.get(RBAC, "RoleBinding", name, ns)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": ns}]

    # kwok runs the pod: the Deployment becomes available; the InferenceService "tiny" is missing.
    await eventually_equal(
        lambda: _status(admin, "front", ns).get("phase"), "Degraded", within=90, what="phase"
    )
    status = _status(admin, "front", ns)
    assert status["endpoint"] == f"http://{name}.{ns}.svc.cluster.local:8080/v1/chat/completions"
    assert status["observedGeneration"] == 1 and status["activeRules"] == 1
    backends = {b["name"]: b for b in status["backends"]}
    assert backends["local"]["healthy"] is False and "does not exist" in backends["local"]["message"]
    assert backends["cloud"]["address"] == "https://api.openai.com" and backends["cloud"]["tier"] == "cloud"
    conditions = _conditions(status)
    assert conditions["Ready"] == ("True", "BackendsNotReady")
    assert conditions["Reconciling"] == ("False", "Converged") and "Stalled" not in conditions

    # Converged: reconciling again writes nothing (counted in its namespace: earlier tests'
    # namespaces may still be going away, with status writes of their own).
    await settled(routers)
    writes = await writes_quiesce(operator, namespace=ns)
    await reconcile_now(routers, ObjectKey(ns, "front"))
    await asyncio.sleep(0.5)
    await operator.manager.recorder.drain()
    assert operator.mutating_requests(ns) == writes

    # An invalid spec (a rule naming an unknown backend): Failed, naming the field, and an Event;
    # the router's objects stay (it keeps serving the last good spec).
    patched = _router("front", rules=[{"name": "tiny", "route": {"backends": ["nowhere"]}}])
    admin.apply(patched, namespace=ns)
    await eventually_equal(lambda: _status(admin, "front", ns).get("phase"), "Failed", what="Failed")
    status = _status(admin, "front", ns)
    conditions = _conditions(status)
    assert conditions["Stalled"] == ("True", "InvalidSpec") and conditions["Ready"] == (
        "False",
        "InvalidSpec",
    )
    ready = next(cond for cond in status["conditions"] if cond["type"] == "Ready")
    assert "spec.rules[0].route.backends" in ready["message"] and "nowhere" in ready["message"]

    def invalid_spec_events() -> list[dict[str, Any]]:
        return [
            e
            for e in admin.list("events.k8s.io/v1", "Event", ns)
            if e.get("reason") == "InvalidSpec" and (e.get("regarding") or {}).get("name") == "front"
        ]

    await eventually(invalid_spec_events, what="the InvalidSpec Event")
    assert admin.get_or_none("apps/v1", "Deployment", name, ns) is not None

    # Fixed again: Stalled turns False/Recovered (never removed).
    admin.apply(_router("front"), namespace=ns)
    await eventually_equal(lambda: _status(admin, "front", ns).get("phase"), "Degraded", what="recovered")
    assert _conditions(_status(admin, "front", ns))["Stalled"] == ("False", "Recovered")
    admin.delete(c.API_VERSION, c.ROUTER_KIND, "front", ns)
