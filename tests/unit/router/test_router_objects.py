"""What the controller makes of a ModelRouter (its objects) and reports (its status): pure, with
explicit time, table-driven."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from llmkube.api.modelrouter import ModelRouter
from llmkube.plan.apiserver.pod_security import violations
from llmkube.plan.router.objects import (
    RouterPlanConfig,
    deployment,
    endpoint_url,
    role_binding,
    router_objects,
    service,
)
from llmkube.plan.router.permissions import ROUTER_PERMISSIONS, role_rules
from llmkube.plan.router.status import router_status, stamped, status_changed
from llmkube.plan.router.validation import validate

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _router(name: str = "front", generation: int = 1, **spec: Any) -> ModelRouter:
    body = {
        "backends": [
            {"name": "local", "inferenceServiceRef": {"name": "tiny"}},
            {
                "name": "cloud",
                "external": {"provider": "openai", "model": "m", "credentialsSecretRef": {"name": "keys"}},
            },
        ],
        "defaultRoute": "local",
        **spec,
    }
    return ModelRouter.model_validate(
        {
            "metadata": {"name": name, "namespace": "ns", "uid": "u-1", "generation": generation},
            "spec": body,
        }
    )


def _spec(router: ModelRouter) -> dict[str, Any]:
    return router.model_dump(by_alias=True, exclude_none=True, mode="json")["spec"]


@pytest.mark.parametrize(
    "spec",
    [
        {},
        {"proxy": {"replicas": 3, "image": "registry.example/router:1", "imagePullSecrets": [{"name": "p"}]}},
        {"policy": {"apiKeys": {"secretRef": {"name": "clients"}}, "auditLog": {"sink": "file"}}},
        {"proxy": {"resources": {"limits": {"memory": "1Gi"}}}},
    ],
)
def test_the_router_pod_meets_restricted_pod_security_whatever_the_spec(spec: dict[str, Any]) -> None:
    made = deployment(_router(**spec), RouterPlanConfig())
    assert violations(made["spec"]["template"], "restricted") == []
    container = made["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["llmkube", "router"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_only_the_secrets_the_spec_names_are_mounted_read_only_and_optional() -> None:
    """The provider keys and client keys the spec names, and each InferenceService backend's server
    key (plan/inferenceservice/server_key.py: only a metal service has one; the volume is optional)."""
    made = deployment(_router(policy={"apiKeys": {"secretRef": {"name": "clients"}}}), RouterPlanConfig())
    pod = made["spec"]["template"]["spec"]
    secrets = {v["secret"]["secretName"]: v["secret"] for v in pod["volumes"] if "secret" in v}
    assert set(secrets) == {"keys", "clients", "tiny-server-key"}
    assert all(s["optional"] is True and s["defaultMode"] == 0o440 for s in secrets.values())
    mounts = {m["mountPath"]: m.get("readOnly") for m in pod["containers"][0]["volumeMounts"]}
    assert mounts == {
        "/var/run/llmkube/credentials/keys": True,
        "/var/run/llmkube/api-keys/clients": True,
        "/var/run/llmkube/server-keys/tiny": True,
    }


@pytest.mark.parametrize(
    ("spec", "image", "replicas"),
    [
        ({}, "ghcr.io/llmkube/llmkube:", 1),
        ({"proxy": {"replicas": 2}}, "ghcr.io/llmkube/llmkube:", 2),
        ({"proxy": {"image": "mine:1"}}, "mine:1", 1),
    ],
)
def test_image_and_replicas(spec: dict[str, Any], image: str, replicas: int) -> None:
    made = deployment(_router(**spec), RouterPlanConfig())
    assert made["spec"]["template"]["spec"]["containers"][0]["image"].startswith(image)
    assert made["spec"]["replicas"] == replicas
    assert made["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    flag = deployment(_router(), RouterPlanConfig(image="localhost/llmkube:dev"))
    assert flag["spec"]["template"]["spec"]["containers"][0]["image"] == "localhost/llmkube:dev"


def test_every_object_is_owned_named_and_labelled_alike() -> None:
    objects = router_objects(_router(), RouterPlanConfig())
    assert [o["kind"] for o in objects] == ["ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"]
    for obj in objects:
        meta = obj["metadata"]
        assert meta["name"] == "front-router-proxy" and meta["namespace"] == "ns"
        assert meta["ownerReferences"][0]["uid"] == "u-1" and meta["ownerReferences"][0]["controller"] is True
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "llmkube"


def test_the_role_is_the_router_permission_list_its_own_router_only() -> None:
    rules = role_rules("front", ["tiny", "big", "tiny"])
    assert len(rules) == len(ROUTER_PERMISSIONS)
    own = next(r for r in rules if r["resources"] == ["modelrouters"])
    assert own["resourceNames"] == ["front"] and own["verbs"] == ["list", "watch"]
    assert not any("secrets" in r["resources"] for r in rules)  # Secrets come mounted, never read
    # Scale to zero: its own backends only, by name (their Deployments have their names).
    backends = next(r for r in rules if r["resources"] == ["inferenceservices"])
    assert backends["resourceNames"] == ["big", "tiny"] and backends["verbs"] == ["list", "watch", "patch"]
    scale = next(r for r in rules if r["resources"] == ["deployments/scale"])
    assert scale["resourceNames"] == ["big", "tiny"] and scale["verbs"] == ["get", "patch"]
    # No InferenceService backend: no rule (an empty resourceNames would grant every object).
    assert not any(r.get("resourceNames") == [] for r in role_rules("front"))
    assert len(role_rules("front")) == len(ROUTER_PERMISSIONS) - 2
    binding = role_binding(_router())
    assert binding["roleRef"]["name"] == "front-router-proxy"


HOST = "http://front-router-proxy.ns.svc.cluster.local"


@pytest.mark.parametrize(
    ("endpoint", "url", "port", "kind"),
    [
        (None, f"{HOST}:8080/v1/chat/completions", 8080, "ClusterIP"),
        ({"port": 9000, "type": "NodePort"}, f"{HOST}:9000/v1/chat/completions", 9000, "NodePort"),
        ({"path": "/v1"}, f"{HOST}:8080/v1", 8080, "ClusterIP"),
    ],
)
def test_endpoint_and_service(endpoint: dict[str, Any] | None, url: str, port: int, kind: str) -> None:
    router = _router(**({"endpoint": endpoint} if endpoint else {}))
    assert endpoint_url(router) == url
    made = service(router)
    assert made["spec"]["ports"][0]["port"] == port and made["spec"]["type"] == kind


def _available(generation: int = 1, available: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "status": {"availableReplicas": available, "observedGeneration": generation},
    }


READY_ISVC = {"metadata": {"name": "tiny"}, "status": {"phase": "Ready"}}
PENDING_ISVC = {"metadata": {"name": "tiny"}, "status": {"phase": "Pending"}}
#: scaled to zero after an idle period: the router wakes it, so it counts as a healthy backend
ASLEEP_ISVC = {
    "metadata": {"name": "tiny"},
    "status": {
        "phase": "Stopped",
        "conditions": [{"type": "ScaledToZero", "status": "True", "reason": "Idle"}],
    },
}
STOPPED_ISVC = {"metadata": {"name": "tiny"}, "status": {"phase": "Stopped"}}
PROVISIONING, ROLLING_OUT = ("False", "Provisioning"), ("True", "RollingOut")
CONVERGED, INVALID = ("False", "Converged"), ("False", "InvalidSpec")


@pytest.mark.parametrize(
    ("spec", "deployment_obj", "isvcs", "phase", "ready", "reconciling"),
    [
        ({}, None, {}, "Provisioning", PROVISIONING, ROLLING_OUT),
        ({}, _available(available=0), {"tiny": READY_ISVC}, "Provisioning", PROVISIONING, ROLLING_OUT),
        ({}, _available(), {}, "Degraded", ("True", "BackendsNotReady"), CONVERGED),
        ({}, _available(), {"tiny": PENDING_ISVC}, "Degraded", ("True", "BackendsNotReady"), CONVERGED),
        ({}, _available(), {"tiny": READY_ISVC}, "Ready", ("True", "Ready"), CONVERGED),
        ({}, _available(), {"tiny": ASLEEP_ISVC}, "Ready", ("True", "Ready"), CONVERGED),
        ({}, _available(), {"tiny": STOPPED_ISVC}, "Degraded", ("True", "BackendsNotReady"), CONVERGED),
        ({"defaultRoute": "nowhere"}, _available(), {"tiny": READY_ISVC}, "Failed", INVALID, INVALID),
    ],
)
def test_phase_and_conditions(
    spec: dict[str, Any],
    deployment_obj: dict[str, Any] | None,
    isvcs: dict[str, Any],
    phase: str,
    ready: tuple[str, str],
    reconciling: tuple[str, str],
) -> None:
    router = _router(**spec)
    raw = _spec(router)
    status = router_status(
        router, raw, validate(raw, "front"), deployment=deployment_obj, isvcs=isvcs, now=NOW
    )
    found = {c.type: (c.status, c.reason) for c in status.conditions or ()}
    assert (status.phase, found["Ready"], found["Reconciling"]) == (phase, ready, reconciling)
    assert status.observed_generation == 1
    if phase == "Failed":
        assert found["Stalled"] == ("True", "InvalidSpec")
        message = next(c.message for c in status.conditions or () if c.type == "Ready")
        assert "spec.defaultRoute" in message
    else:
        assert "Stalled" not in found


def test_stalled_recovers_and_a_converged_status_is_never_written_again() -> None:
    bad = _router(defaultRoute="nowhere")
    raw = _spec(bad)
    failed = router_status(bad, raw, validate(raw, "front"), deployment=None, isvcs={}, now=NOW)
    good = _router(generation=2).model_copy(update={"status": failed})
    raw = _spec(good)
    later = NOW + timedelta(minutes=5)
    fixed = router_status(
        good, raw, validate(raw, "front"), deployment=_available(2), isvcs={"tiny": READY_ISVC}, now=later
    )
    found = {c.type: (c.status, c.reason) for c in fixed.conditions or ()}
    assert found["Stalled"] == ("False", "Recovered") and fixed.phase == "Ready"
    fixed = stamped(failed, fixed, later)
    assert fixed.last_updated == later
    # The same facts a minute later: nothing differs but the clock, so no write.
    again_router = good.model_copy(update={"status": fixed})
    again = router_status(
        again_router, raw, validate(raw, "front"), deployment=_available(2), isvcs={"tiny": READY_ISVC},
        now=later + timedelta(minutes=1),
    )  # fmt: skip
    assert not status_changed(fixed, again)
    assert stamped(fixed, again, later + timedelta(minutes=1)).last_updated == later


def test_mcp_server_is_accepted_and_said_to_have_no_effect() -> None:
    router = _router(mcpServer={"enabled": True})
    raw = _spec(router)
    status = router_status(router, raw, validate(raw, "front"), deployment=_available(), isvcs={}, now=NOW)
    mcp = next(c for c in status.conditions or () if c.type == "McpServer")
    assert (mcp.status, mcp.reason) == ("False", "NotImplemented")


def test_the_router_pods_get_the_controller_s_proxies_and_nothing_without_them() -> None:
    from llmkube.apimachinery.proxy import ProxyConfig

    proxy = ProxyConfig(https_proxy="http://proxy.corp:3128", no_proxy=".svc,.cluster.local")
    made = deployment(_router(), RouterPlanConfig(egress_proxy=proxy))
    env = {e["name"]: e.get("value") for e in made["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "http://proxy.corp:3128"
    assert env["NO_PROXY"] == env["no_proxy"] == ".svc,.cluster.local"
    assert "HTTP_PROXY" not in env
    bare = deployment(_router(), RouterPlanConfig())
    names = [e["name"] for e in bare["spec"]["template"]["spec"]["containers"][0]["env"]]
    assert names == ["POD_NAMESPACE", "POD_NAME"]
