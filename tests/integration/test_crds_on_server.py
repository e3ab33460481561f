"""The generated CRDs install on a real API server, every sample is accepted, and what the server
stores (with its defaults applied) parses back into our types."""

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from llmkube.api.crds import all_crds
from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.testing.cluster import default_bin_dir
from llmkube.testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube.testing.rest import RestError, load_yaml_documents

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"
API = "inference.llmkube.dev/v1alpha1"


def _contains(stored: Any, sent: Any) -> bool:
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            k in stored and _contains(stored[k], v) for k, v in sent.items()
        )
    return bool(stored == sent)


@pytest.fixture(scope="module")
def crds_installed(api_cluster: ClusterHandle) -> ClusterHandle:
    apply_manifests(api_cluster, all_crds())
    return api_cluster


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.yaml")))
def test_samples_are_accepted_and_round_trip(
    crds_installed: ClusterHandle, namespace: str, sample: str
) -> None:
    admin = crds_installed.admin()
    for doc in load_yaml_documents(SAMPLES / sample):
        created = admin.create(doc, namespace=namespace)
        kind = {"InferenceService": InferenceService, "Model": Model}[doc["kind"]]
        parsed = kind.model_validate(created)
        # Everything we sent is stored unchanged; the server only adds its defaults.
        assert _contains(parsed.to_json()["spec"], doc["spec"])


def test_server_applies_the_contract_defaults(crds_installed: ClusterHandle, namespace: str) -> None:
    admin = crds_installed.admin()
    created = admin.create(
        {
            "apiVersion": API,
            "kind": "InferenceService",
            "metadata": {"name": "defaults"},
            "spec": {"modelRef": "m", "endpoint": {}, "autoscaling": {"maxReplicas": 3}},
        },
        namespace=namespace,
    )
    spec = created["spec"]
    assert (spec["runtime"], spec["replicas"], spec["priority"]) == ("llamacpp", 1, "normal")
    assert spec["endpoint"] == {"port": 8080, "path": "/v1/chat/completions", "type": "ClusterIP"}
    assert spec["autoscaling"]["minReplicas"] == 1
    # The defaults the server applied are the defaults our types assume.
    local = InferenceService.model_validate({"spec": {"modelRef": "m", "endpoint": {}}})
    assert local.spec.endpoint is not None
    assert local.spec.endpoint.model_dump(by_alias=True, exclude_none=True) == spec["endpoint"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"modelRef": "m", "replicas": 11}, "spec.replicas"),
        ({"modelRef": "m", "runtime": "ollama"}, "spec.runtime"),
        ({"replicas": 1}, "spec.modelRef"),
        ({"modelRef": "m", "ropeScaling": {"type": "yarn", "factor": "x"}}, "spec.ropeScaling.factor"),
    ],
)
def test_server_rejects_invalid_specs_naming_the_field(
    crds_installed: ClusterHandle, namespace: str, spec: dict[str, Any], field: str
) -> None:
    admin = crds_installed.admin()
    with pytest.raises(RestError) as err:
        admin.create(
            {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": "bad"}, "spec": spec},
            namespace=namespace,
        )
    assert err.value.status == 422
    assert field in str(err.value)


def test_printer_columns_and_scale_subresource(crds_installed: ClusterHandle, namespace: str) -> None:
    admin = crds_installed.admin()
    admin.create(
        {
            "apiVersion": API,
            "kind": "InferenceService",
            "metadata": {"name": "cols"},
            "spec": {"modelRef": "m"},
        },
        namespace=namespace,
    )
    path = admin.path_for(API, "InferenceService", namespace, "cols")
    # What `kubectl get isvc -o wide` shows: the server renders the printer columns.
    table = admin.request("GET", path, accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    columns = [c["name"] for c in table["columnDefinitions"]]
    assert columns == ["Name", "Phase", "Model", "Replicas", "Reason", "Queue", "Priority", "Endpoint", "Age"]
    wide = [c["name"] for c in table["columnDefinitions"] if c["priority"] == 1]
    assert wide == ["Reason", "Queue", "Priority"]
    cells = dict(zip(columns, table["rows"][0]["cells"], strict=True))
    assert (cells["Name"], cells["Model"], cells["Priority"]) == ("cols", "m", "normal")
    # The scale subresource reads and writes spec.replicas (kubectl scale, KEDA).
    scale = admin.request("GET", path + "/scale")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    scale["spec"]["replicas"] = 0
    admin.request("PUT", path + "/scale", scale)
    assert admin.get(API, "InferenceService", "cols", namespace)["spec"]["replicas"] == 0


def _kserve_like_crd() -> dict[str, Any]:
    """A CRD that claims `isvc` as KServe's InferenceService does (serving.kserve.io)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "inferenceservices.serving.kserve.io"},
        "spec": {
            "group": "serving.kserve.io",
            "scope": "Namespaced",
            "names": {
                "kind": "InferenceService",
                "plural": "inferenceservices",
                "singular": "inferenceservice",
                "shortNames": ["isvc"],
            },
            "versions": [
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def test_lkisvc_reaches_our_inferenceservices_where_kserve_also_claims_isvc(
    crds_installed: ClusterHandle, namespace: str
) -> None:
    admin = crds_installed.admin()
    apply_manifests(crds_installed, [_kserve_like_crd()])
    admin.create(
        {
            "apiVersion": API,
            "kind": "InferenceService",
            "metadata": {"name": "ours"},
            "spec": {"modelRef": "m"},
        },
        namespace=namespace,
    )
    kubectl = default_bin_dir() / "kubectl"

    def get(resource: str) -> str:
        # Discovery is cached per kubeconfig: a fresh cache dir sees both CRDs.
        for _ in range(30):
            result = subprocess.run(
                [
                    str(kubectl),
                    f"--kubeconfig={crds_installed.kubeconfig}",
                    "--cache-dir",
                    str(crds_installed.kubeconfig.parent / "kubectl-cache"),
                    "-n",
                    namespace,
                    "get",
                    resource,
                    "-o",
                    "name",
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            if result.returncode == 0:
                return result.stdout.strip()
            time.sleep(1)  # the new CRD is not in discovery yet
        raise AssertionError(f"kubectl get {resource}: {result.stderr}")

    try:
        assert get("lkisvc") == "inferenceservice.inference.llmkube.dev/ours"
        # The full name always works, whichever CRD kubectl picks for the shared short name.
        assert get("inferenceservices.inference.llmkube.dev") == "inferenceservice.inference.llmkube.dev/ours"
    finally:
        crd = _kserve_like_crd()
        admin.delete(crd["apiVersion"], crd["kind"], crd["metadata"]["name"])
