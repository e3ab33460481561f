"""The oldest Kubernetes the default admission policies run on (the chart's kubeVersion, 1.35):
an API server emulating 1.35 creates every one of them; one emulating 1.34 refuses the
Secret-references policy, whose CEL uses the list extensions `flatten()` and `distinct()` that
Kubernetes added in 1.34 and, like every CEL library, accepts in a new expression from the next
release on. kube-apiserver's --emulated-version reaches three releases back from its own (1.37)."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from llmkube_testing.cluster import LocalCluster, MissingBinaryError
from llmkube_testing.rest import KubeRest, RestError, load_yaml_documents

ADMISSION = Path(__file__).resolve().parents[2] / "manifests" / "admission"
OLDEST = "1.35"
SECRET_REFERENCES = "llmkube-secret-references"


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


def served_version(admin: KubeRest) -> str:
    info = admin.request("GET", "/version")
    return f"{info['major']}.{info['minor']}"


def test_the_oldest_claimed_kubernetes_creates_every_default_policy() -> None:
    docs = default_policies()
    with emulating(OLDEST) as admin:
        assert served_version(admin) == OLDEST
        for doc in docs:
            admin.create(doc)
        stored = admin.request("GET", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies")
    names = sorted(item["metadata"]["name"] for item in stored["items"])
    assert names == sorted(d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy")
    assert len(names) == 6


def test_the_release_before_refuses_the_list_extensions() -> None:
    docs = default_policies()
    (secret_references,) = [
        d
        for d in docs
        if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == SECRET_REFERENCES
    ]
    uses_extensions = {
        f"spec.variables[{index}].expression"
        for index, variable in enumerate(secret_references["spec"]["variables"])
        if ".flatten()" in variable["expression"] or ".distinct()" in variable["expression"]
    }
    assert len(uses_extensions) == 2
    with emulating("1.34") as admin:
        assert served_version(admin) == "1.34"
        with pytest.raises(RestError) as refused:
            admin.create(secret_references)
        # the others need nothing newer than 1.31 (CEL's format library): created
        for doc in docs:
            if doc["kind"] == "ValidatingAdmissionPolicy" and doc is not secret_references:
                admin.create(doc)
    assert refused.value.status == 422 and refused.value.reason == "Invalid"
    causes = refused.value.body["details"]["causes"]  # type: ignore[index]
    assert {cause["field"] for cause in causes} == uses_extensions
    assert all(cause["reason"] == "FieldValueInvalid" for cause in causes)
