"""`kubectl apply --server-side -k manifests/` on a real control plane (kwok nodes run the pods), the
GitOps variants of it, its components, and who owns the PriorityClasses afterwards."""

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from install_support import (
    MANIFESTS,
    controller_as_deployed,
    dedicated_cluster,
    deployment_available,
    documents,
    server_side_apply,
    started_and_idle,
    the_deployment,
)
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.controller_harness import ControllerHarness
from llmkube_testing.rest import KubeRest, RestError, wait_until
from tools import kustomize_build, kustomize_overlay

from llmkube.kube.resource import PRIORITY_CLASSES as PRIORITY_CLASS_RESOURCE
from llmkube.plan.inferenceservice.priority import PRIORITY_CLASSES

NAMESPACE = "llmkube-system"
SCHEDULING = "scheduling.k8s.io/v1"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with dedicated_cluster() as local:
        yield local


@pytest.fixture(scope="module")
def installed(cluster: LocalCluster) -> list[dict[str, Any]]:
    """The README's install command: every object of the kustomization, applied by manager `kubectl`."""
    docs = documents(kustomize_build(MANIFESTS))
    server_side_apply(cluster.admin(), docs, field_manager="kubectl")
    return docs


def classes(admin: KubeRest) -> dict[str, dict[str, Any]]:
    return {
        pc.name: found
        for pc in PRIORITY_CLASSES
        if (found := admin.get_or_none(SCHEDULING, "PriorityClass", pc.name)) is not None
    }


def managers(obj: dict[str, Any]) -> set[str]:
    return {entry["manager"] for entry in obj["metadata"].get("managedFields") or []}


def refused(controller: ControllerHarness) -> int:
    return sum(controller.requests.rbac_refusals().values())


def test_the_install_comes_up_under_restricted_pod_security(cluster: LocalCluster, installed: Any) -> None:
    admin = cluster.admin()
    namespace = admin.get("v1", "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    deployment = deployment_available(admin, NAMESPACE, "llmkube-controller", replicas=2)
    pods = admin.list("v1", "Pod", NAMESPACE, label_selector="app.kubernetes.io/component=controller")
    assert len(pods) == 2 and all(p["status"]["phase"] == "Running" for p in pods)
    # Both replicas on the one CPU node: the anti-affinity is a preference, not a requirement.
    assert {p["spec"]["nodeName"] for p in pods} == {"kwok-cpu-0"}
    # Its own class, above every inference priority: the pods it creates never preempt it.
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "llmkube-controller"
    ours = admin.get("scheduling.k8s.io/v1", "PriorityClass", "llmkube-controller")["value"]
    assert all(p["spec"]["priority"] == ours for p in pods)
    inference = admin.get("scheduling.k8s.io/v1", "PriorityClass", "llmkube-critical")["value"]
    assert ours > inference
    pdb = wait_until(
        lambda: (
            (found := admin.get("policy/v1", "PodDisruptionBudget", "llmkube-controller", NAMESPACE))
            .get("status", {})
            .get("disruptionsAllowed")
            == 1
            and found
        ),
        timeout=60,
        what="the PDB allows one disruption",
    )
    assert pdb["status"]["currentHealthy"] == 2
    assert set(classes(admin)) == {pc.name for pc in PRIORITY_CLASSES}


def test_flux_health_checks_name_objects_of_the_install_that_turn_healthy(
    cluster: LocalCluster, installed: list[dict[str, Any]]
) -> None:
    flux = documents((MANIFESTS / "gitops" / "flux" / "llmkube.yaml").read_text())
    (operator,) = [d for d in flux if d["kind"] == "Kustomization" and d["metadata"]["name"] == "llmkube"]
    assert (MANIFESTS.parent / operator["spec"]["path"]).resolve() == MANIFESTS
    built = {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in installed}
    admin = cluster.admin()
    for check in operator["spec"]["healthChecks"]:
        assert (check["kind"], check["name"], check.get("namespace")) in built, check
        obj = admin.get(check["apiVersion"], check["kind"], check["name"], check.get("namespace"))
        conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
        wanted = "Established" if check["kind"] == "CustomResourceDefinition" else "Available"
        assert conditions.get(wanted) == "True", (check, conditions)
    (apps,) = [d for d in flux if d["kind"] == "Kustomization" and d["metadata"]["name"] == "inference"]
    assert apps["spec"]["dependsOn"] == [{"name": "llmkube"}]
    assert {e["kind"] for e in apps["spec"]["healthCheckExprs"]} == {"InferenceService", "Model"}


def test_argocd_and_flux_apply_the_same_objects_without_conflict(
    cluster: LocalCluster, installed: list[dict[str, Any]]
) -> None:
    """A GitOps tool taking over a kubectl install: same values, so server-side apply shares the
    fields instead of refusing (no force needed)."""
    admin = cluster.admin()
    for manager in ("argocd-controller", "kustomize-controller"):
        server_side_apply(admin, installed, field_manager=manager)
    assert {"kubectl", "argocd-controller", "kustomize-controller"} <= managers(
        admin.get("apps/v1", "Deployment", "llmkube-controller", NAMESPACE)
    )


@pytest.mark.parametrize("manage", ["as shipped (false)", "true"])
async def test_a_controller_start_after_the_install_makes_no_write(
    cluster: LocalCluster, installed: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, manage: str
) -> None:
    """As shipped the installer owns the classes; even a controller told to manage them finds them
    right and takes no ownership (its RBAC from manifests/ would refuse a write: a 403 would count)."""
    admin = cluster.admin()
    before = {name: pc["metadata"]["resourceVersion"] for name, pc in classes(admin).items()}
    deployment = copy.deepcopy(the_deployment(installed))
    if manage == "true":
        monkeypatch.setenv("LLMKUBE_MANAGE_PRIORITY_CLASSES", "true")
        for env in deployment["spec"]["template"]["spec"]["containers"][0]["env"]:
            if env["name"] == "LLMKUBE_MANAGE_PRIORITY_CLASSES":
                env["value"] = "true"
    assert cluster.controller_kubeconfig is not None
    async with controller_as_deployed(deployment, cluster.controller_kubeconfig, monkeypatch) as controller:
        assert (controller.controllers.priority_classes is None) == (manage != "true")
        await started_and_idle(controller)
        assert controller.mutating_requests() == 0, controller.requests.request_counts
        assert refused(controller) == 0
    after = classes(admin)
    assert {name: pc["metadata"]["resourceVersion"] for name, pc in after.items()} == before
    assert all("llmkube-controller" not in managers(pc) for pc in after.values())


async def test_an_installer_owned_class_changed_or_deleted_stays_so(
    cluster: LocalCluster, installed: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GitOps overlay case: with the shipped flag the controller never writes a class back."""
    admin = cluster.admin()
    low = next(
        d for d in installed if d["kind"] == "PriorityClass" and d["metadata"]["name"] == "llmkube-low"
    )
    changed = {**low, "description": "batch jobs of the platform team"}
    assert cluster.controller_kubeconfig is not None
    async with controller_as_deployed(
        the_deployment(installed), cluster.controller_kubeconfig, monkeypatch
    ) as controller:
        seen = controller.manager.informer(PRIORITY_CLASS_RESOURCE).store  # the shared informer
        server_side_apply(admin, [changed], field_manager="argocd-controller", force=True)  # a GitOps overlay
        admin.delete(SCHEDULING, "PriorityClass", "llmkube-batch")
        # The controller's own cache saw both changes...
        await asyncio.get_running_loop().run_in_executor(
            None,
            lambda: wait_until(
                lambda: (
                    seen.get_object(None, "llmkube-batch") is None
                    and (seen.get_object(None, "llmkube-low") or {}).get("description")
                    == changed["description"]
                ),
                timeout=30,
                what="the controller's cache has the change and the deletion",
            ),
        )
        await started_and_idle(controller)
        # ...and wrote nothing back.
        assert controller.mutating_requests() == 0
    assert admin.get(SCHEDULING, "PriorityClass", "llmkube-low")["description"] == changed["description"]
    assert admin.get_or_none(SCHEDULING, "PriorityClass", "llmkube-batch") is None
    batch = next(d for d in installed if d["metadata"]["name"] == "llmkube-batch")
    server_side_apply(admin, [low, batch], field_manager="argocd-controller", force=True)


async def test_with_the_component_the_controller_owns_and_repairs_the_classes(
    cluster: LocalCluster, installed: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """components/controller-owns-priorityclasses: the install no longer carries the classes, the
    controller gets the writer role and the flag. It takes over the classes already there without a
    write (same values), repairs a change, recreates a deleted class, and a restart writes nothing."""
    admin = cluster.admin()
    docs = documents(kustomize_overlay(tmp_path, "components/controller-owns-priorityclasses"))
    # Only the controller's own class stays in the install: the controller cannot create the class
    # its own pods need before they run.
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "PriorityClass"] == ["llmkube-controller"]
    server_side_apply(admin, docs, field_manager="argocd-controller", force=True)  # the overlay, synced
    deployment = the_deployment(docs)
    assert cluster.controller_kubeconfig is not None
    async with controller_as_deployed(deployment, cluster.controller_kubeconfig, monkeypatch) as controller:
        assert controller.controllers.priority_classes is not None
        await started_and_idle(controller)
        assert controller.mutating_requests() == 0
        normal = admin.get(SCHEDULING, "PriorityClass", "llmkube-normal")
        edit = {
            "apiVersion": SCHEDULING,
            "kind": "PriorityClass",
            "metadata": {"name": "llmkube-normal"},
            "value": normal["value"],
            "description": "edited by hand",
        }
        admin.request(
            "PATCH",
            admin.path_for(SCHEDULING, "PriorityClass", None, "llmkube-normal"),
            edit,
            content_type="application/merge-patch+json",
            query={"fieldManager": "kubectl-edit"},
        )
        admin.delete(SCHEDULING, "PriorityClass", "llmkube-high")
        documented = {pc.name: pc for pc in PRIORITY_CLASSES}

        def repaired() -> bool:
            now = classes(admin)
            return (
                set(now) == set(documented)
                and now["llmkube-normal"]["description"] == documented["llmkube-normal"].description
                and now["llmkube-high"]["value"] == documented["llmkube-high"].value
            )

        await asyncio.get_running_loop().run_in_executor(
            None, lambda: wait_until(repaired, timeout=30, what="the controller repaired and recreated")
        )
        assert refused(controller) == 0
    # A restart against the repaired classes: nothing to do.
    async with controller_as_deployed(deployment, cluster.controller_kubeconfig, monkeypatch) as restarted:
        await started_and_idle(restarted)
        assert restarted.mutating_requests() == 0


def test_the_critical_priority_component_comes_with_the_quota_its_pods_need(
    cluster: LocalCluster, installed: Any, tmp_path: Path
) -> None:
    admin = cluster.admin()
    docs = documents(kustomize_overlay(tmp_path, "components/critical-priority", "components/network-policy"))
    server_side_apply(admin, docs, field_manager="argocd-controller", force=True)  # the overlay, synced
    deployment = deployment_available(admin, NAMESPACE, "llmkube-controller", replicas=2)
    assert deployment["spec"]["template"]["spec"]["priorityClassName"] == "system-cluster-critical"

    def quota_counts_both_replicas() -> bool:
        quota = admin.get("v1", "ResourceQuota", "llmkube-critical-pods", NAMESPACE)
        return (quota.get("status") or {}).get("used", {}).get("pods") == "2"

    wait_until(quota_counts_both_replicas, timeout=60, what="the quota's scope selects the controller pods")
    policy = admin.get("networking.k8s.io/v1", "NetworkPolicy", "llmkube-controller", NAMESPACE)
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


@pytest.mark.parametrize(
    ("role", "may_write"),
    [("edit", True), ("view", False)],
)
def test_people_bound_to_edit_manage_services_and_people_bound_to_view_only_read(
    cluster: LocalCluster, installed: Any, role: str, may_write: bool
) -> None:
    """The aggregated roles, with a real user and the RBAC authorizer: no llmkube-specific binding."""
    admin = cluster.admin()
    namespace = f"team-{role}"
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": f"restricted-{role}", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [
                {"kind": "User", "name": "llmkube-restricted", "apiGroup": "rbac.authorization.k8s.io"}
            ],
        }
    )
    user = cluster.restricted()
    api = "inference.llmkube.dev/v1alpha1"
    model = {"apiVersion": api, "kind": "Model", "metadata": {"name": "m"}, "spec": {"source": "org/m"}}
    service = {
        "apiVersion": api,
        "kind": "InferenceService",
        "metadata": {"name": "s"},
        "spec": {"modelRef": "m"},
    }
    router = {
        "apiVersion": api,
        "kind": "ModelRouter",
        "metadata": {"name": "r"},
        "spec": {"backends": [{"name": "s", "inferenceServiceRef": {"name": "s"}}]},
    }
    # The aggregation controller fills `view`/`edit` from our labelled roles; the user can list once it has.
    wait_until(
        lambda: user.list(api, "Model", namespace) == [], timeout=60, what=f"{role} includes llmkube-viewer"
    )
    if may_write:
        user.create(model, namespace=namespace)
        user.create(service, namespace=namespace)
        user.create(router, namespace=namespace)
        assert [s["metadata"]["name"] for s in user.list(api, "InferenceService", namespace)] == ["s"]
        assert [r["metadata"]["name"] for r in user.list(api, "ModelRouter", namespace)] == ["r"]
        for kind, name in (("InferenceService", "s"), ("ModelRouter", "r")):
            with pytest.raises(RestError) as status_write:
                user.request(
                    "PATCH",
                    user.path_for(api, kind, namespace, name) + "/status",
                    {"status": {"phase": "Ready"}},
                    content_type="application/merge-patch+json",
                )
            assert status_write.value.status == 403, "only the controller writes status"
    else:
        admin.create(model, namespace=namespace)
        admin.create(router, namespace=namespace)
        assert [m["metadata"]["name"] for m in user.list(api, "Model", namespace)] == ["m"]
        assert [r["metadata"]["name"] for r in user.list(api, "ModelRouter", namespace)] == ["r"]
        for body in (service, {**router, "metadata": {"name": "r2"}}):
            with pytest.raises(RestError) as create:
                user.create(body, namespace=namespace)
            assert create.value.status == 403
        with pytest.raises(RestError) as delete:
            user.request("DELETE", user.path_for(api, "Model", namespace, "m"))
        assert delete.value.status == 403


def test_the_argocd_health_snippet_merges_into_an_existing_argocd_cm(cluster: LocalCluster) -> None:
    """The documented `kubectl -n argocd patch configmap argocd-cm --patch-file ...`: a strategic
    merge that adds our two keys and keeps Argo CD's own."""
    admin = cluster.admin()
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "argocd"}})
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "argocd-cm", "namespace": "argocd"},
            "data": {"url": "https://argocd.example.com", "timeout.reconciliation": "180s"},
        }
    )
    snippet = documents((MANIFESTS / "gitops" / "argocd" / "argocd-cm-health.yaml").read_text())[0]
    merged = admin.request(
        "PATCH",
        admin.path_for("v1", "ConfigMap", "argocd", "argocd-cm"),
        snippet,
        content_type="application/strategic-merge-patch+json",
        query={"fieldManager": "kubectl-patch"},
    )
    assert merged["data"]["url"] == "https://argocd.example.com"
    lua = MANIFESTS / "gitops" / "argocd"
    assert (
        merged["data"]["resource.customizations.health.inference.llmkube.dev_Model"]
        == (lua / "health-model.lua").read_text()
    )
    assert set(merged["data"]) == {"url", "timeout.reconciliation", *snippet["data"]}


def test_the_tenancy_patch_install_md_shows_reaches_the_controllers_allowances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/install.md's kustomize patch for what tenants may ask for, built on top of manifests/:
    the controller the Deployment runs reads the allowances from its environment."""
    import yaml

    from llmkube.cli import build_parser
    from llmkube.plan.allowed_hosts import parse_allowed_hosts
    from llmkube.process.config import controllers_config

    text = (MANIFESTS.parent / "docs" / "install.md").read_text()
    after = text.split("What tenants may ask for", 1)[1]
    snippet = after.split("```yaml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "manifests").symlink_to(MANIFESTS)
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump({"resources": ["manifests"], **yaml.safe_load(snippet)})
    )
    (container,) = the_deployment(documents(kustomize_build(tmp_path)))["spec"]["template"]["spec"][
        "containers"
    ]
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = controllers_config(build_parser().parse_args(container["args"]))
    assert config.router.external_hosts == parse_allowed_hosts("litellm.ai-gateway.svc,*.gateway.example")
    assert config.operator.tenancy.allowed_service_types == {"ClusterIP", "NodePort"}
    assert config.router.tenancy == config.operator.tenancy
