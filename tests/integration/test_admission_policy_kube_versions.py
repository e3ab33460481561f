"""The oldest Kubernetes the default admission policies run on (the chart's kubeVersion, 1.35): an
API server emulating 1.35 creates every one of them. Such a server compiles a new CEL expression
with the libraries of the release before its own (its minimum compatibility version, 1.34), and
1.34 is the release that added the list extensions the Secret-references policy uses, `flatten()`
and `distinct()`: one release older compiles them for 1.33, which has neither (Kubernetes' CEL base
environment, k8s.io/apiserver/pkg/cel/environment). kube-apiserver's --emulated-version reaches
three releases back from its own (1.37), and no further for the compatibility version: 1.34's
refusal cannot be shown on this binary, 1.35's acceptance can."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from llmkube_testing.cluster import LocalCluster, MissingBinaryError
from llmkube_testing.rest import KubeRest, load_yaml_documents

ADMISSION = Path(__file__).resolve().parents[2] / "manifests" / "admission"
OLDEST = "1.35"


def default_policies() -> list[dict[str, Any]]:
    """manifests/admission as the default install has it (its kustomization's resources, in order)."""
    resources = yaml.safe_load((ADMISSION / "kustomization.yaml").read_text())["resources"]
    return [doc for name in resources for doc in load_yaml_documents(ADMISSION / name)]


@contextmanager
def emulating(version: str) -> Iterator[KubeRest]:
    cluster = LocalCluster("api", apiserver_args=(f"--emulated-version=kube={version}",))
    try:
        cluster.start()
    except MissingBinaryError as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield cluster.admin()
    finally:
        cluster.stop()


def test_the_oldest_claimed_kubernetes_creates_every_default_policy() -> None:
    docs = default_policies()
    uses_list_extensions = [
        d["metadata"]["name"]
        for d in docs
        if d["kind"] == "ValidatingAdmissionPolicy"
        and any(
            ".flatten()" in v["expression"] or ".distinct()" in v["expression"]
            for v in d["spec"]["variables"]
        )
    ]
    assert uses_list_extensions == ["llmkube-secret-references"]  # what sets the floor at 1.35
    with emulating(OLDEST) as admin:
        version = admin.request("GET", "/version")
        # it behaves as 1.35 and compiles new expressions for 1.34
        assert (version["emulationMinor"], version["minCompatibilityMinor"]) == ("35", "34")
        for doc in docs:
            admin.create(doc)
        stored = admin.request("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies")
        bindings = admin.request(
            "GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
        )
    expected = sorted(d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    assert sorted(item["metadata"]["name"] for item in stored["items"]) == expected
    # every policy the chart ships, each with its binding
    assert len(expected) == len([d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"])
    assert len(expected) >= 7 and len(bindings["items"]) == len(expected)
