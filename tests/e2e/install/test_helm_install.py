"""The Helm chart: lint, template (with default values it renders what `kustomize build manifests/`
renders, labels aside), its values, and `helm install` on a real control plane."""

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from install_support import (
    CHART,
    MANIFESTS,
    controller_as_deployed,
    dedicated_cluster,
    deployment_available,
    documents,
    started_and_idle,
    the_deployment,
)
from llmkube_testing.cluster import K8S_VERSION, LocalCluster
from tools import kustomize_build, kustomize_overlay, run, tool

from llmkube.plan.inferenceservice.priority import PRIORITY_CLASSES

Key = tuple[str, str, str | None]
# The Kubernetes version the tests run against (helm assumes its client library's, 1.37, offline:
# test_helm_assumes_the_kubernetes_version_of_its_client_library).
KUBE_VERSION = ("--kube-version", K8S_VERSION)
# What `helm install` learns from a cluster and `helm template` is told: it serves the API of the
# admission policies (without it they are left out: tests/e2e/install/test_chart_kube_versions.py).
CLUSTER_APIS = ("--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy")


@pytest.fixture
def helm_env(tmp_path: Path) -> dict[str, str]:
    """Helm's own cache and configuration in the test's directory, not the user's home."""
    return {
        "HELM_CACHE_HOME": str(tmp_path / "helm-cache"),
        "HELM_CONFIG_HOME": str(tmp_path / "helm-config"),
        "HELM_DATA_HOME": str(tmp_path / "helm-data"),
    }


def template(
    helm_env: dict[str, str], *values: str, namespace: str = "llmkube-system"
) -> list[dict[str, Any]]:
    argv = [
        "template",
        "llmkube",
        CHART,
        "--namespace",
        namespace,
        "--include-crds",
        *KUBE_VERSION,
        *CLUSTER_APIS,
    ]
    for value in values:
        argv += ["--set", value]
    return documents(run(tool("helm"), *argv, env=helm_env))


def helm_fails(helm_env: dict[str, str], *argv: str) -> str:
    """`helm ARGV` must fail; returns what it said (lint reports on stdout, the others on stderr)."""
    result = subprocess.run(
        [str(tool("helm")), *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **helm_env},
        check=False,
    )
    assert result.returncode != 0, result.stdout
    return result.stdout + result.stderr


def without_tests(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The release's objects without `helm test`'s pods (hooks, created only by `helm test`)."""
    hook = "helm.sh/hook"
    return [d for d in docs if (d["metadata"].get("annotations") or {}).get(hook) != "test"]


def by_key(docs: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    keyed = {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")): d for d in docs}
    assert len(keyed) == len(docs), "two objects with the same kind, name and namespace"
    return keyed


def without_labels(doc: dict[str, Any]) -> dict[str, Any]:
    """The object with what legitimately differs between Helm and kustomize removed: labels (Helm
    adds release labels) and the dashboards' text layout (compared as JSON)."""
    doc = json.loads(json.dumps(doc))
    doc["metadata"].pop("labels", None)
    template_meta = (doc.get("spec") or {}).get("template", {}).get("metadata")
    if isinstance(template_meta, dict):
        template_meta.pop("labels", None)
    if doc["kind"] == "ConfigMap":
        doc["data"] = {name: json.loads(text) for name, text in doc["data"].items()}
    return doc


def test_the_chart_lints_with_every_option(helm_env: dict[str, str]) -> None:
    helm = tool("helm")
    run(helm, "lint", "--strict", CHART, *KUBE_VERSION, env=helm_env)
    run(
        helm,
        "lint",
        "--strict",
        CHART,
        *KUBE_VERSION,
        "--set",
        "monitoring.enabled=true,networkPolicy.enabled=true,criticalPriority.enabled=true,"
        "priorityClasses.managedBy=controller,watchNamespace=team-a,modelCache.existingClaim=models",
        env=helm_env,
    )


def test_default_values_render_the_kustomize_install(helm_env: dict[str, str]) -> None:
    """One source of truth: the same objects, field for field, but for labels. The Namespace is
    Helm's to create (--create-namespace)."""
    from_kustomize = by_key(documents(kustomize_build(MANIFESTS)))
    from_kustomize.pop(("Namespace", "llmkube-system", None))
    from_helm = by_key(without_tests(template(helm_env)))
    assert sorted(from_helm, key=str) == sorted(from_kustomize, key=str)
    for key, expected in from_kustomize.items():
        assert without_labels(from_helm[key]) == without_labels(expected), key


def test_monitoring_renders_the_monitoring_component(helm_env: dict[str, str], tmp_path: Path) -> None:
    """monitoring.enabled is the one switch: every object of the component (for the release
    "llmkube" the chart's names are the component's)."""
    kinds = {"ServiceMonitor", "PodMonitor", "PrometheusRule", "ConfigMap"}
    component = {
        key: doc
        for key, doc in by_key(documents(kustomize_overlay(tmp_path, "monitoring"))).items()
        if key[0] in kinds
    }
    chart = {
        key: doc
        for key, doc in by_key(template(helm_env, "monitoring.enabled=true")).items()
        if key[0] in kinds
    }
    assert sorted(chart, key=str) == sorted(component, key=str)
    assert {key[0] for key in chart} == kinds
    assert sorted(key[1] for key in chart if key[0] == "PodMonitor") == [
        "llmkube-inference",
        "llmkube-router",
    ]
    for key, expected in component.items():
        assert without_labels(chart[key]) == without_labels(expected), key
    dashboards = chart[("ConfigMap", "llmkube-dashboards", "llmkube-system")]
    assert dashboards["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert sorted(dashboards["data"]) == sorted(
        p.name for p in (MANIFESTS / "monitoring" / "dashboards").glob("*.json")
    )


def test_the_monitoring_parts_can_be_left_out(helm_env: dict[str, str]) -> None:
    docs = template(
        helm_env, "monitoring.enabled=true", "monitoring.routers=false", "monitoring.inferencePods=false"
    )
    assert [d["kind"] for d in docs if d["kind"] == "PodMonitor"] == []
    assert {d["kind"] for d in docs} >= {"ServiceMonitor", "PrometheusRule"}


@pytest.mark.parametrize(
    ("owner", "classes", "flag", "writer_role"),
    [("chart", 5, "false", False), ("controller", 0, "true", True), ("none", 0, "false", False)],
)
def test_one_owner_for_the_priority_classes(
    helm_env: dict[str, str], owner: str, classes: int, flag: str, writer_role: bool
) -> None:
    docs = template(helm_env, f"priorityClasses.managedBy={owner}")
    inference_classes = [
        d for d in docs if d["kind"] == "PriorityClass" and d["metadata"]["name"] != "llmkube-controller"
    ]
    assert len(inference_classes) == classes
    env = {
        e["name"]: e.get("value")
        for e in the_deployment(docs)["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["LLMKUBE_MANAGE_PRIORITY_CLASSES"] == flag
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "ClusterRole"}
    assert ("llmkube-priorityclass-writer" in names) is writer_role


@pytest.mark.parametrize("critical", [False, True])
def test_the_controller_runs_above_every_inference_priority(helm_env: dict[str, str], critical: bool) -> None:
    """The pods the controller creates for InferenceServices must never preempt it: with no class
    it ran at 0, and on a full node the scheduler evicted it for a tenant's llmkube-normal pod."""
    docs = template(helm_env, f"criticalPriority.enabled={str(critical).lower()}")
    spec = the_deployment(docs)["spec"]["template"]["spec"]
    classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PriorityClass"}
    if critical:
        assert spec["priorityClassName"] == "system-cluster-critical"
        assert "llmkube-controller" not in classes
        return
    assert spec["priorityClassName"] == "llmkube-controller"
    ours = classes.pop("llmkube-controller")
    assert classes and all(ours["value"] > c["value"] for c in classes.values()), ours
    assert ours["value"] < 1_000_000_000  # a user class, below the system-* ones
    assert ours["preemptionPolicy"] == "PreemptLowerPriority"


def test_an_unknown_priority_class_owner_is_refused_with_a_message(
    helm_env: dict[str, str], tmp_path: Path
) -> None:
    result = subprocess.run(
        [
            str(tool("helm")),
            "template",
            "llmkube",
            str(CHART),
            *KUBE_VERSION,
            "--set",
            "priorityClasses.managedBy=gitops",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **helm_env},
        check=False,
    )
    assert result.returncode != 0
    # values.schema.json says it first (the template's own check stays for a chart without the schema).
    assert (
        "at '/priorityClasses/managedBy': value must be one of 'chart', 'controller', 'none'" in result.stderr
    )


def test_values_reach_the_deployment(helm_env: dict[str, str]) -> None:
    docs = template(
        helm_env,
        "watchNamespace=team-a",
        "replicaCount=3",
        "image.repository=registry.example.com/llmkube",
        "image.tag=9.9.9",
        "resources.limits.memory=1Gi",
        "modelCache.existingClaim=model-cache",
        "criticalPriority.enabled=true",
        "tenancy.routerAllowedImages={registry.example.com/llmkube}",
        "tenancy.routerExternalHosts={litellm.gateway.svc:4000,*.internal.example}",
        namespace="platform",
    )
    deployment = the_deployment(docs)
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert deployment["metadata"]["namespace"] == "platform"
    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "registry.example.com/llmkube:9.9.9"
    assert "--namespace=team-a" in container["args"]
    assert "--router-allowed-images=registry.example.com/llmkube" in container["args"]
    assert "--router-external-hosts=litellm.gateway.svc:4000,*.internal.example" in container["args"]
    assert container["resources"]["limits"]["memory"] == "1Gi"
    assert {v["name"]: v for v in pod["volumes"]}["model-cache"]["persistentVolumeClaim"] == {
        "claimName": "model-cache"
    }
    assert pod["priorityClassName"] == "system-cluster-critical"
    quota = [d for d in docs if d["kind"] == "ResourceQuota"]
    assert quota and quota[0]["metadata"]["namespace"] == "platform"
    # One watched namespace: the controller's rights are a Role there, bound to its ServiceAccount.
    binding = next(
        d for d in docs if d["kind"] == "RoleBinding" and d["metadata"]["name"] == "llmkube-controller"
    )
    assert binding["metadata"]["namespace"] == "team-a"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "llmkube-controller", "namespace": "platform"}
    ]
    assert not [
        d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == "llmkube-controller"
    ]


def test_a_watched_namespace_renders_the_namespace_scoped_component(
    helm_env: dict[str, str], tmp_path: Path
) -> None:
    """watchNamespace gives what kustomize gives with components/namespace-scoped (its namespace
    llmkube-workloads): the same RBAC objects, rule for rule, and no cluster-wide write."""
    rbac = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    component = {
        key: doc
        for key, doc in by_key(documents(kustomize_overlay(tmp_path, "components/namespace-scoped"))).items()
        if key[0] in rbac
    }
    chart = {
        key: doc
        for key, doc in by_key(template(helm_env, "watchNamespace=llmkube-workloads")).items()
        if key[0] in rbac
    }
    assert sorted(chart, key=str) == sorted(component, key=str)
    for key, expected in component.items():
        assert without_labels(chart[key]) == without_labels(expected), key
    deployment = the_deployment(documents(kustomize_overlay(tmp_path, "components/namespace-scoped")))
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["LLMKUBE_NAMESPACE"] == "llmkube-workloads"
    writes = {"create", "update", "patch", "delete", "deletecollection", "*"}
    for (kind, name, _), doc in component.items():
        if kind == "ClusterRole" and not name.startswith(("llmkube-viewer", "llmkube-editor")):
            assert not {verb for rule in doc["rules"] for verb in rule["verbs"]} & writes, name


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with dedicated_cluster() as local:
        yield local


async def test_helm_install_runs_and_its_controller_writes_nothing_at_start(
    cluster: LocalCluster, helm_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = ["--kubeconfig", str(cluster.kubeconfig)]
    helm = tool("helm")
    # A typo fails the install itself, before anything is created.
    said = helm_fails(helm_env, "install", "llmkube", str(CHART), "--namespace", "llmkube-system",
                      "--create-namespace", *kubeconfig, "--set", "replicas=3")  # fmt: skip
    assert "additional properties 'replicas' not allowed" in said, said
    assert cluster.admin().get_or_none("v1", "Namespace", "llmkube-system") is None
    run(helm, "install", "llmkube", CHART, "--namespace", "llmkube-system", "--create-namespace", *kubeconfig,
        "--wait", "--timeout", "3m", env=helm_env)  # fmt: skip
    admin = cluster.admin()
    deployment_available(admin, "llmkube-system", "llmkube-controller", replicas=2)
    installed = {
        pc.name
        for pc in PRIORITY_CLASSES
        if admin.get_or_none("scheduling.k8s.io/v1", "PriorityClass", pc.name)
    }
    assert installed == {pc.name for pc in PRIORITY_CLASSES}
    status = run(helm, "status", "llmkube", "--namespace", "llmkube-system", *kubeconfig, env=helm_env)
    assert "STATUS: deployed" in status

    # The controller as the chart configures it (Helm owns the classes): a start writes nothing.
    rendered = documents(
        run(helm, "get", "manifest", "llmkube", "--namespace", "llmkube-system", *kubeconfig, env=helm_env)
    )
    assert cluster.controller_kubeconfig is not None
    async with controller_as_deployed(
        the_deployment(rendered), cluster.controller_kubeconfig, monkeypatch
    ) as controller:
        assert controller.controllers.priority_classes is None
        await started_and_idle(controller)
        assert controller.mutating_requests() == 0

    run(helm, "uninstall", "llmkube", "--namespace", "llmkube-system", "--wait", *kubeconfig, env=helm_env)
    assert admin.get_or_none("apps/v1", "Deployment", "llmkube-controller", "llmkube-system") is None
    # Helm never deletes what crds/ installed: the users' Models and InferenceServices survive.
    assert admin.get_or_none(
        "apiextensions.k8s.io/v1", "CustomResourceDefinition", "models.inference.llmkube.dev"
    )


def test_helm_assumes_the_kubernetes_version_of_its_client_library(helm_env: dict[str, str]) -> None:
    """hack/build-tools.sh stamps helm as Helm's Makefile does: without --kube-version, `helm
    template` and `helm lint` assume Kubernetes 1.37 (a plain build assumed 1.20 and refused the
    chart's kubeVersion)."""
    rendered = run(tool("helm"), "template", "llmkube", CHART, env=helm_env)
    assert "kind: Deployment" in rendered
    run(tool("helm"), "lint", "--strict", CHART, env=helm_env)
    capabilities = run(tool("helm"), "version", "--template", "{{ .Version }}", env=helm_env)
    assert capabilities.startswith("v3."), capabilities


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("replicas=3", "additional properties 'replicas' not allowed"),
        ("monitoring.lables.release=kps", "at '/monitoring': additional properties 'lables' not allowed"),
        ("image.pullPolicy=Sometimes", "at '/image/pullPolicy'"),
        ("replicaCount=0", "at '/replicaCount'"),
        ("runtimeImages.llamacpp-cuda13=x", "at '/runtimeImages': additional properties 'llamacpp-cuda13'"),
        ("namespace.podSecurity=strict", "at '/namespace/podSecurity'"),
        ("namespaceCache.accessMode=ReadWriteMany2", "at '/namespaceCache/accessMode'"),
        ("modelStorage.mode=per-node", "at '/modelStorage/mode'"),
        ("modelStorage.ephemeralSizeLimit=lots", "at '/modelStorage/ephemeralSizeLimit'"),
        ("modelStorage.maxServiceCacheSize=lots", "at '/modelStorage/maxServiceCacheSize'"),
    ],
)
def test_a_misspelt_or_invalid_value_fails_the_install(
    helm_env: dict[str, str], value: str, message: str
) -> None:
    for verb in ("template", "lint"):  # and install: test_helm_install_runs_...
        release = ["llmkube"] if verb == "template" else []
        said = helm_fails(helm_env, verb, *release, str(CHART), "--set", value)
        assert message in said, said


def test_conventional_values(helm_env: dict[str, str]) -> None:
    docs = template(
        helm_env,
        "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/llmkube",
        "podLabels.team=platform",
        "podSecurityContext.runAsUser=1234",
        "securityContext.readOnlyRootFilesystem=false",
        "commonLabels.cost-center=ml",
        "runtimeImages.llamacpp-cuda=mirror.local/llama.cpp:server-cuda-b10068",
        "runtimeImages.vllm=mirror.local/vllm:1",
    )
    deployment = the_deployment(docs)
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert account["metadata"]["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/llmkube"}
    assert pod["metadata"]["labels"]["team"] == "platform"
    assert pod["spec"]["securityContext"] == {
        "runAsUser": 1234,
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container["securityContext"]["readOnlyRootFilesystem"] is False
    assert (
        "--runtime-images=llamacpp-cuda=mirror.local/llama.cpp:server-cuda-b10068,vllm=mirror.local/vllm:1"
        in container["args"]
    )
    # commonLabels reach every object Helm renders (crds/ is installed as it is, never templated).
    for doc in docs:
        if doc["kind"] != "CustomResourceDefinition":
            assert doc["metadata"]["labels"]["cost-center"] == "ml", (doc["kind"], doc["metadata"]["name"])


def test_an_existing_service_account(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "serviceAccount.create=false", "serviceAccount.name=platform-controller")
    assert not [d for d in docs if d["kind"] == "ServiceAccount"]
    assert the_deployment(docs)["spec"]["template"]["spec"]["serviceAccountName"] == "platform-controller"
    subjects = [s for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding") for s in d["subjects"]]
    assert subjects and all(s["name"] == "platform-controller" for s in subjects)
    said = helm_fails(helm_env, "template", "llmkube", str(CHART), "--set", "serviceAccount.create=false")
    assert "serviceAccount.name is required when serviceAccount.create is false" in said


@pytest.mark.parametrize(
    ("release", "values", "prefix"),
    [
        ("llmkube", [], "llmkube"),
        ("prod", [], "prod-llmkube"),
        ("prod", ["nameOverride=inference"], "prod-inference"),
        ("prod", ["fullnameOverride=ml-operator"], "ml-operator"),
    ],
)
def test_names_follow_the_release_and_the_overrides(
    helm_env: dict[str, str], release: str, values: list[str], prefix: str
) -> None:
    argv = ["template", release, CHART, "--namespace", "ops"]
    for value in values:
        argv += ["--set", value]
    docs = documents(run(tool("helm"), *argv, env=helm_env))
    deployment = the_deployment(docs)
    assert deployment["metadata"]["name"] == f"{prefix}-controller"
    # The selector never changes with the names (a Deployment's selector is immutable).
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/name": "llmkube",
        "app.kubernetes.io/component": "controller",
    }
    assert {d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"} == {f"{prefix}-controller"}


def test_monitoring_objects_carry_the_labels_prometheus_selects(helm_env: dict[str, str]) -> None:
    docs = template(helm_env, "monitoring.enabled=true", "monitoring.labels.release=kube-prometheus-stack")
    kinds = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
    found = {d["kind"]: d for d in docs if d["kind"] in kinds}
    assert set(found) == kinds
    for kind, doc in found.items():
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack", kind


def test_a_namespace_the_chart_creates_enforces_pod_security(helm_env: dict[str, str]) -> None:
    assert not [d for d in template(helm_env) if d["kind"] == "Namespace"]
    (namespace,) = [d for d in template(helm_env, "namespace.create=true") if d["kind"] == "Namespace"]
    assert namespace["metadata"]["name"] == "llmkube-system"
    labels = namespace["metadata"]["labels"]
    for mode in ("enforce", "audit", "warn"):
        assert labels[f"pod-security.kubernetes.io/{mode}"] == "restricted"
    assert namespace["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    (baseline,) = [
        d
        for d in template(helm_env, "namespace.create=true", "namespace.podSecurity=baseline")
        if d["kind"] == "Namespace"
    ]
    assert baseline["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "baseline"


def test_helm_test_is_a_restricted_pod_that_asks_the_controller(helm_env: dict[str, str]) -> None:
    (test_pod,) = [d for d in template(helm_env) if d not in without_tests([d])]
    assert test_pod["kind"] == "Pod"
    assert test_pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    (container,) = test_pod["spec"]["containers"]
    script = container["command"][-1]
    # The Service's variable first (no cluster DNS needed: tests/node/test_newcomer.py runs it on a
    # node without DNS), its DNS name otherwise.
    assert (
        'os.environ.get("LLMKUBE_CONTROLLER_METRICS_SERVICE_HOST") or '
        '"llmkube-controller-metrics.llmkube-system.svc"' in script
    )
    assert 'url = f"http://{host}:8080/metrics"' in script
    assert test_pod["spec"]["enableServiceLinks"] is True
    assert (
        container["image"]
        == the_deployment(template(helm_env))["spec"]["template"]["spec"]["containers"][0]["image"]
    )


@pytest.mark.parametrize(
    ("values", "claim"),
    [
        ((), ("100Gi", None, ["ReadWriteOnce"])),
        (
            (
                "namespaceCache.size=500Gi",
                "namespaceCache.storageClass=nfs",
                "namespaceCache.accessMode=ReadWriteMany",
            ),
            ("500Gi", "nfs", ["ReadWriteMany"]),
        ),
    ],
)
def test_the_namespace_cache_claim_follows_the_values(
    helm_env: dict[str, str], values: tuple[str, ...], claim: tuple[str, str | None, list[str]]
) -> None:
    """The chart's args, read by the controller's own flags, make the llmkube-model-cache claim
    the planner writes in each namespace: its size, StorageClass and access mode."""
    import argparse

    from llmkube.plan.inferenceservice.cache_pvc import cache_pvc_intent
    from llmkube.process.config import controllers_config
    from llmkube.process.flags import add_controller_flags

    (container,) = the_deployment(template(helm_env, *values))["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_controller_flags(parser)
    args = parser.parse_args(container["args"][1:])  # after the `controller` command
    spec = cache_pvc_intent("team-a", controllers_config(args).operator)["spec"]
    size, storage_class, modes = claim
    assert (spec["resources"]["requests"]["storage"], spec.get("storageClassName"), spec["accessModes"]) == (
        size,
        storage_class,
        modes,
    )


@pytest.mark.parametrize(
    ("values", "storage"),
    [
        ((), ("namespace", "20Gi")),
        (("modelStorage.mode=ephemeral",), ("ephemeral", "20Gi")),
        (("modelStorage.mode=ephemeral", "modelStorage.ephemeralSizeLimit=2048Mi"), ("ephemeral", "2Gi")),
        (("modelStorage.mode=namespace",), ("namespace", "20Gi")),
    ],
)
def test_the_model_storage_follows_the_values(
    helm_env: dict[str, str], values: tuple[str, ...], storage: tuple[str, str]
) -> None:
    """The chart's args, read by the controller's own flags: where pods keep downloaded models."""
    import argparse

    from llmkube.process.config import controllers_config
    from llmkube.process.flags import add_controller_flags

    (container,) = the_deployment(template(helm_env, *values))["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_controller_flags(parser)
    operator = controllers_config(parser.parse_args(container["args"][1:])).operator
    assert (operator.model_storage, operator.ephemeral_cache_size_limit) == storage


@pytest.mark.parametrize(
    ("values", "storage"),
    [
        ((), ("namespace", "", "100Gi")),
        (("modelStorage.mode=per-service",), ("per-service", "", "100Gi")),
        (
            (
                "modelStorage.mode=per-service",
                "modelStorage.serviceCacheSize=2048Mi",
                "modelStorage.maxServiceCacheSize=10Gi",
            ),
            ("per-service", "2Gi", "10Gi"),
        ),
    ],
)
def test_the_per_service_cache_follows_the_values(
    helm_env: dict[str, str], values: tuple[str, ...], storage: tuple[str, str, str]
) -> None:
    """The chart's args, read by the controller's own flags: the per-service claims' sizes."""
    import argparse

    from llmkube.process.config import controllers_config
    from llmkube.process.flags import add_controller_flags

    (container,) = the_deployment(template(helm_env, *values))["spec"]["template"]["spec"]["containers"]
    parser = argparse.ArgumentParser()
    add_controller_flags(parser)
    operator = controllers_config(parser.parse_args(container["args"][1:])).operator
    assert (operator.model_storage, operator.service_cache_size, operator.max_service_cache_size) == storage


def test_the_agent_endpointslices_policy_follows_the_values(helm_env: dict[str, str]) -> None:
    """The agents' identities reach the policy's matchConditions, the release namespace (where the
    controller keeps its list of metal Services, and its Role for it) the binding's paramRef."""
    docs = template(
        helm_env,
        "admissionPolicy.agentEndpointSlices.agents={system:serviceaccount:ops:mac-studio,"
        "system:serviceaccount:ops:gpu-box}",
        namespace="ops",
    )
    keyed = by_key(docs)
    for name in ("llmkube-agent-endpointslices", "llmkube-agent-endpointslice-labels"):
        policy = keyed[("ValidatingAdmissionPolicy", name, None)]
        (condition,) = policy["spec"]["matchConditions"]
        assert condition["expression"] == (
            'request.userInfo.username in ["system:serviceaccount:ops:mac-studio",'
            '"system:serviceaccount:ops:gpu-box"]'
        ), name
    assert (
        "paramRef"
        not in keyed[("ValidatingAdmissionPolicyBinding", "llmkube-agent-endpointslice-labels", None)]["spec"]
    )
    binding = keyed[("ValidatingAdmissionPolicyBinding", "llmkube-agent-endpointslices", None)]
    assert binding["spec"]["paramRef"]["namespace"] == "ops"
    role = keyed[("Role", "llmkube-own-namespace", "ops")]
    named = [name for rule in role["rules"] for name in rule.get("resourceNames", ())]
    assert binding["spec"]["paramRef"]["name"] in named
    deployment = the_deployment(docs)
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    pod_namespace = next(e for e in container["env"] if e["name"] == "POD_NAMESPACE")
    assert pod_namespace["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"  # the release's

    off = by_key(template(helm_env, "admissionPolicy.agentEndpointSlices.enabled=false"))
    assert ("ValidatingAdmissionPolicy", "llmkube-agent-endpointslices", None) not in off
    assert ("ValidatingAdmissionPolicy", "llmkube-inferenceservices", None) in off
    # A policy that names no agent would hold none: refused, as is a name CEL would not read.
    for value in ("null", "{}", '{"sys\\"tem"}'):
        said = helm_fails(
            helm_env, "template", "llmkube", str(CHART), *KUBE_VERSION,
            "--set", f"admissionPolicy.agentEndpointSlices.agents={value}",
        )  # fmt: skip
        assert "agents" in said, (value, said)
