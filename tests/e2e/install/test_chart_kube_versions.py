"""The chart on the oldest Kubernetes it claims (Chart.yaml kubeVersion: the default admission
policies need 1.35, tests/integration/test_admission_policy_kube_versions.py): it renders every
policy there when the cluster serves ValidatingAdmissionPolicy, refuses an older cluster by its
kubeVersion, and leaves the policies out, with a warning in NOTES.txt, where the API is not served
(a real API server with that API turned off). NOTES.txt also warns while the controller's image is
the unpublished default."""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from install_support import CHART, MANIFESTS, documents
from llmkube_testing.cluster import LocalCluster, MissingBinaryError
from tools import run, tool

OLDEST = "1.35.0"
VAP_API = "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"


@pytest.fixture
def helm_env(tmp_path: Path) -> dict[str, str]:
    return {name: str(tmp_path / name) for name in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME")}


def render(helm_env: dict[str, str], *argv: str) -> list[dict[str, Any]]:
    return documents(
        run(tool("helm"), "template", "llmkube", CHART, "--namespace", "llmkube-system", *argv, env=helm_env)
    )


def admission_objects(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    kinds = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs if d["kind"] in kinds)


def shipped_policies() -> list[tuple[str, str]]:
    resources = yaml.safe_load((MANIFESTS / "admission" / "kustomization.yaml").read_text())["resources"]
    docs = [doc for name in resources for doc in documents((MANIFESTS / "admission" / name).read_text())]
    return admission_objects(docs)


def test_the_chart_claims_the_oldest_version_the_policies_run_on() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == ">=1.35.0-0"


def test_the_oldest_claimed_version_renders_every_default_policy(helm_env: dict[str, str]) -> None:
    docs = render(helm_env, "--kube-version", OLDEST, "--api-versions", VAP_API)
    assert admission_objects(docs) == shipped_policies()
    assert len(shipped_policies()) == 14  # seven policies (GPUQuota's the seventh) and their bindings
    assert {d["kind"] for d in docs} >= {"Deployment", "ClusterRole", "PodDisruptionBudget"}


def test_an_older_kubernetes_is_refused_by_the_kube_version(helm_env: dict[str, str]) -> None:
    result = subprocess.run(
        [
            str(tool("helm")),
            "template",
            "llmkube",
            str(CHART),
            "--kube-version",
            "1.34.9",
            "--api-versions",
            VAP_API,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **helm_env},
        check=False,
    )
    assert result.returncode != 0
    assert (
        "chart requires kubeVersion: >=1.35.0-0 which is incompatible with Kubernetes v1.34.9"
        in result.stderr
    )


@pytest.fixture(scope="module")
def without_the_api() -> Iterator[LocalCluster]:
    """A real API server that does not serve ValidatingAdmissionPolicy (turned off, as a cluster
    may have it)."""
    off = ",".join(
        f"admissionregistration.k8s.io/v1/{resource}=false"
        for resource in ("validatingadmissionpolicies", "validatingadmissionpolicybindings")
    )
    # with its admission plugin, which waits for the API it no longer has
    args = (f"--runtime-config={off}", "--disable-admission-plugins=ValidatingAdmissionPolicy")
    cluster = LocalCluster("api", apiserver_args=args)
    try:
        cluster.start()
    except MissingBinaryError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()


def dry_run(
    cluster: LocalCluster, helm_env: dict[str, str], *values: str
) -> tuple[list[dict[str, Any]], str]:
    """`helm install --dry-run=server` against the cluster: what it would create, and its NOTES."""
    argv: list[str | Path] = ["install", "llmkube", CHART, "--namespace", "ops", "--dry-run=server"]
    argv += ["--kubeconfig", cluster.kubeconfig]
    for value in values:
        argv += ["--set", value]
    output = run(tool("helm"), *argv, env=helm_env)
    manifest, _, notes = output.partition("\nNOTES:\n")
    return documents(manifest.partition("\nMANIFEST:\n")[2]), notes


def test_without_the_api_the_policies_are_left_out_and_the_notes_say_so(
    without_the_api: LocalCluster, helm_env: dict[str, str]
) -> None:
    served = without_the_api.admin().request("GET", "/apis/admissionregistration.k8s.io/v1")
    assert "validatingadmissionpolicies" not in {r["name"] for r in served["resources"]}
    docs, notes = dry_run(without_the_api, helm_env)
    assert admission_objects(docs) == []
    assert {d["kind"] for d in docs} >= {"Deployment", "ClusterRole"}
    assert "WARNING: the admission policies (admissionPolicy.enabled) were NOT installed" in notes
    _, quiet = dry_run(without_the_api, helm_env, "admissionPolicy.enabled=false")
    assert "admission policies" not in quiet
    # and offline: helm template leaves them out unless told the cluster serves the API
    assert admission_objects(render(helm_env, "--kube-version", OLDEST)) == []


def test_the_notes_warn_while_the_image_is_the_unpublished_default(
    without_the_api: LocalCluster, helm_env: dict[str, str]
) -> None:
    _, notes = dry_run(without_the_api, helm_env)
    assert "WARNING: the controller's image ghcr.io/llmkube/llmkube:" in notes
    assert "make image" in notes and "helm upgrade llmkube charts/llmkube -n ops --reuse-values" in notes
    _, built = dry_run(
        without_the_api, helm_env, "image.repository=localhost/llmkube", "image.pullPolicy=Never"
    )
    assert "controller's image" not in built
