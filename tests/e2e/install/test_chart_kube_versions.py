"""The chart on the oldest Kubernetes it claims (Chart.yaml kubeVersion: the default admission
policies need 1.35, tests/integration/test_admission_policy_kube_versions.py): it renders every
policy there when the cluster serves ValidatingAdmissionPolicy, refuses an older cluster by its
kubeVersion, and leaves the policies out, with a warning in NOTES.txt, where the API is not served."""

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from install_support import CHART, MANIFESTS, documents
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
    assert len(shipped_policies()) == 12  # six policies and their bindings
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


def test_without_the_api_the_policies_are_left_out_and_the_notes_say_so(helm_env: dict[str, str]) -> None:
    assert admission_objects(render(helm_env, "--kube-version", OLDEST)) == []
    # `helm install --dry-run=client` renders NOTES.txt against helm's own API list (no kinds in it)
    notes = run(tool("helm"), "install", "llmkube", CHART, "--dry-run=client", env=helm_env)
    assert "WARNING: the admission policies (admissionPolicy.enabled) were NOT installed" in notes
    off = ("--set", "admissionPolicy.enabled=false")
    quiet = run(tool("helm"), "install", "llmkube", CHART, "--dry-run=client", *off, env=helm_env)
    assert "admission policies" not in quiet
