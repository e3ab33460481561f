"""What docs/install.md tells a newcomer, on a real node: the image `make image` builds (the node
tier's controller image is built by the same script, hack/image.sh, and carries the name `make
image` gives it), `helm install` from the chart, `llmkube deploy` of a tiny model, a completion.
Each step's time lands in the tier's timings. Then the storage switches to `ephemeral` under the running
service (`helm upgrade`), and its new pod, on a size-limited emptyDir, answers too; then to
`per-service`: the service gets a claim of its own, its pod downloads into it and answers, and the
claim goes with the service while the namespace's claim stays as it was.

The chart owns the cluster-wide objects it installs (PriorityClasses, admission policies) and the
kustomize install of the other node tests owns the same names: this module runs before them
(conftest.py orders it first) and uninstalls the release when it is done."""

import contextlib
import json
import os
import subprocess
import sys
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ModelSource
from llmkube_testing.images import CONTROLLER, LLAMA_SERVER, archive_refs, default_images_dir
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import RestError, condition_true
from llmkube_testing.tiny_service import MODEL_FILE
from node_support import (
    CONTROLLER_NAMESPACE,
    CONTROLLER_SELECTOR,
    TIMINGS,
    Stopwatch,
    controller_pods,
    ready_pods,
    wait_for,
)
from tools import ROOT, tool

from llmkube import __version__
from llmkube.manager.config import DEFAULT_LEASE_NAME

pytestmark = pytest.mark.tools  # helm, from hack/build-tools.sh

RELEASE = "llmkube"
# The names `make image` gives (hack/image.sh) and the chart is told (docs/install.md).
IMAGE_REPOSITORY = "localhost/llmkube"
IMAGE = f"{IMAGE_REPOSITORY}:{__version__}"
NAME = "tiny-llama"  # what `llmkube deploy` names the service after the source's file name
SELECTOR = f"inference.llmkube.dev/service={NAME}"
API = "inference.llmkube.dev/v1alpha1"


def helm(cluster: NodeCluster, home: Path, *argv: str, timeout: float = 300) -> str:
    """helm with the node's admin kubeconfig and its own cache and configuration; fails the test
    with its output when it fails."""
    env = {
        "PATH": "/usr/bin:/bin",
        "KUBECONFIG": str(cluster.kubeconfig),
        "HOME": str(home),  # its client's discovery cache (~/.kube/cache) stays in the test's directory
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
    }
    result = subprocess.run(
        [str(tool("helm")), *argv], capture_output=True, text=True, env=env, timeout=timeout, check=False
    )
    assert result.returncode == 0, f"helm {' '.join(argv)}: {result.stderr}{result.stdout}"
    return result.stdout


def llmkube(cluster: NodeCluster, *args: str, timeout: float = 420) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llmkube.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={
            "KUBECONFIG": str(cluster.kubeconfig),
            "PATH": "/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/"),
        },
        check=False,
    )


def image_digests(archive: Path, ref: str) -> set[str]:
    """The manifest and config digests of `ref` in an OCI archive (a pod's imageID names one)."""
    with tarfile.open(archive) as tar:

        def blob(digest: str) -> Any:
            member = tar.extractfile(f"blobs/{digest.replace(':', '/')}")
            assert member is not None
            return json.load(member)

        index_member = tar.extractfile("index.json")
        assert index_member is not None
        index = json.load(index_member)
        (manifest,) = [
            m for m in index["manifests"] if m["annotations"]["org.opencontainers.image.ref.name"] == ref
        ]
        return {manifest["digest"], blob(manifest["digest"])["config"]["digest"]}


@pytest.fixture(scope="module")
def helm_release(node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The release is uninstalled afterwards (and waited for), so the kustomize install of the
    other node tests finds none of its objects."""
    admin = node_cluster.admin()
    existing = admin.get_or_none("apps/v1", "Deployment", "llmkube-controller", CONTROLLER_NAMESPACE)
    if existing is not None:
        pytest.fail(
            "the kustomize install of the node tier is already there: run this module first "
            "(tests/node/conftest.py orders it so)",
            pytrace=False,
        )
    home = tmp_path_factory.mktemp("helm")
    try:
        yield home
    finally:
        helm(
            node_cluster,
            home,
            "uninstall",
            RELEASE,
            "-n",
            CONTROLLER_NAMESPACE,
            "--wait",
            "--ignore-not-found",
        )
        # What the release leaves: its pods a moment longer (the Deployment is gone, the garbage
        # collector takes them) and the controllers' Lease, which would name a gone pod as leader.
        wait_for(
            lambda: not admin.list("v1", "Pod", CONTROLLER_NAMESPACE, label_selector=CONTROLLER_SELECTOR),
            within=120,
            what="the release's controller pods gone",
        )
        with contextlib.suppress(RestError):
            admin.delete("coordination.k8s.io/v1", "Lease", DEFAULT_LEASE_NAME, CONTROLLER_NAMESPACE)


@pytest.fixture(scope="module")
def namespace(node_cluster: NodeCluster, helm_release: Path) -> Iterator[str]:
    """The user's namespace, shared by the two tests (the second changes how the first's service
    stores its model); deleted before the release is."""
    admin, name = node_cluster.admin(), f"newcomer-{uuid.uuid4().hex[:6]}"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    try:
        yield name
    finally:
        with contextlib.suppress(RestError):
            admin.delete("v1", "Namespace", name)
        # Gone before the release is: a namespace still terminating when the next tests' controller
        # starts gets its writes refused (403), which their zero-403 checks count.
        wait_for(
            lambda: admin.get_or_none("v1", "Namespace", name) is None, within=180, what=f"{name} deleted"
        )


def deploy_and_chat(cluster: NodeCluster, source: ModelSource, ns: str, step: str) -> None:
    """`llmkube deploy` (create or update; it waits until Ready) and `llmkube chat`, timed."""
    watch = Stopwatch()
    deploy = llmkube(cluster, "deploy", source.url(), "--context-size", "256", "-n", ns)
    TIMINGS[f"{step}: llmkube deploy -> Ready (s)"] = watch.seconds()
    assert deploy.returncode == 0, deploy.stderr
    watch = Stopwatch()
    chat = llmkube(cluster, "chat", NAME, "Hello, who are you?", "-n", ns, "--max-tokens", "8", "-o", "json")
    TIMINGS[f"{step}: llmkube chat -> completion (s)"] = watch.seconds()
    assert chat.returncode == 0, chat.stderr
    answer: dict[str, Any] = json.loads(chat.stdout)
    assert answer["object"] == "chat.completion"
    assert answer["usage"]["completion_tokens"] > 0, answer


def test_a_newcomer_installs_with_helm_and_gets_a_completion(
    node_cluster: NodeCluster, helm_release: Path, model_source: ModelSource, namespace: str
) -> None:
    admin, ns = node_cluster.admin(), namespace
    archive = default_images_dir() / CONTROLLER.archive
    # The node tier's controller image is what `make image` builds, with the name it gives.
    assert IMAGE in archive_refs(archive), archive_refs(archive)

    # docs/install.md, "The controller image": the loaded image, never pulled; the node has no
    # registry, so the llama.cpp image is the node's own build, as for an air-gapped mirror.
    watch = Stopwatch()
    helm(
        node_cluster,
        helm_release,
        "install", RELEASE, str(ROOT / "charts" / "llmkube"),
        "--namespace", CONTROLLER_NAMESPACE, "--create-namespace",
        "--set", f"image.repository={IMAGE_REPOSITORY}",
        "--set", "image.pullPolicy=Never",
        "--set", f"runtimeImages.llamacpp={LLAMA_SERVER.ref}",
        # The tiny model is served from the cluster's Service network, refused by default.
        "--set", "modelSource.allowedRemoteHosts={10.0.0.0/24}",
        "--wait", "--timeout", "4m",
    )  # fmt: skip
    TIMINGS["newcomer: helm install --wait -> controller Available (s)"] = watch.seconds()
    pods = controller_pods(admin)
    assert len(pods) == 2 and all(condition_true(p, "Ready") for p in pods), [p["status"] for p in pods]
    digests = image_digests(archive, IMAGE)
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        assert status["image"].endswith(IMAGE), status
        assert any(status["imageID"].endswith(digest) for digest in digests), (status["imageID"], digests)

    watch = Stopwatch()
    helm(node_cluster, helm_release, "test", RELEASE, "-n", CONTROLLER_NAMESPACE, "--timeout", "2m")
    TIMINGS["newcomer: helm test (s)"] = watch.seconds()

    deploy_and_chat(node_cluster, model_source, ns, "newcomer")
    isvc = admin.get(API, "InferenceService", NAME, ns)
    assert isvc["status"]["phase"] == "Ready", isvc["status"]
    (pod,) = admin.list("v1", "Pod", ns, label_selector=SELECTOR)
    assert pod["spec"]["containers"][0]["image"] == LLAMA_SERVER.ref  # the chart's runtimeImages value
    # The default storage: the namespace's claim.
    claims = [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    ]
    assert claims == ["llmkube-model-cache"], pod["spec"]["volumes"]


def test_switching_to_ephemeral_storage_rolls_the_service_onto_an_emptydir(
    node_cluster: NodeCluster, helm_release: Path, model_source: ModelSource, namespace: str
) -> None:
    """`modelStorage.mode=ephemeral` under a running service: its pod gives way to one that
    downloads into its own size-limited emptyDir, and that one answers."""
    admin, ns = node_cluster.admin(), namespace
    deploy_and_chat(node_cluster, model_source, ns, "namespace storage")  # as the first test left it
    watch = Stopwatch()
    helm(
        node_cluster,
        helm_release,
        "upgrade", RELEASE, str(ROOT / "charts" / "llmkube"), "--namespace", CONTROLLER_NAMESPACE,
        "--reuse-values",
        "--set", "modelStorage.mode=ephemeral",
        "--set", "modelStorage.ephemeralSizeLimit=64Mi",
        "--wait", "--timeout", "4m",
    )  # fmt: skip
    TIMINGS["ephemeral: helm upgrade --wait -> controller rolled (s)"] = watch.seconds()

    def rolled() -> dict[str, Any] | None:
        pods = ready_pods(admin, ns, SELECTOR)
        every = admin.list("v1", "Pod", ns, label_selector=SELECTOR)
        if len(pods) != 1 or len(every) != 1:
            return None
        volumes = pods[0]["spec"]["volumes"]
        return pods[0] if {"name": "model-storage", "emptyDir": {"sizeLimit": "64Mi"}} in volumes else None

    pod: dict[str, Any] = wait_for(rolled, within=300, what="one Ready pod on the size-limited emptyDir")
    TIMINGS["ephemeral: helm upgrade -> the service's pod Ready on its emptyDir (s)"] = watch.seconds()
    assert not [v for v in pod["spec"]["volumes"] if "persistentVolumeClaim" in v], pod["spec"]["volumes"]
    assert admin.get(API, "InferenceService", NAME, ns)["status"]["phase"] == "Ready"
    deploy_and_chat(node_cluster, model_source, ns, "ephemeral")


def test_switching_to_per_service_storage_gives_the_service_a_claim_deleted_with_it(
    node_cluster: NodeCluster, helm_release: Path, model_source: ModelSource, namespace: str
) -> None:
    """`modelStorage.mode=per-service` under the running service: its pod gives way to one on the
    service's own claim `<service>-model-cache` (bound to one of the node's volumes, owned by the
    service), which the downloader fills and from which llama.cpp answers. Deleting the service
    deletes that claim (the garbage collector follows the owner reference, once pvc-protection sees
    no pod on it); the namespace's claim, which the first test's pod used, is left as it was."""
    admin, ns = node_cluster.admin(), namespace
    own_claim = f"{NAME}-model-cache"
    namespace_claim = admin.get("v1", "PersistentVolumeClaim", "llmkube-model-cache", ns)
    assert namespace_claim["status"]["phase"] == "Bound", namespace_claim["status"]
    assert admin.get_or_none("v1", "PersistentVolumeClaim", own_claim, ns) is None
    watch = Stopwatch()
    helm(
        node_cluster,
        helm_release,
        "upgrade", RELEASE, str(ROOT / "charts" / "llmkube"), "--namespace", CONTROLLER_NAMESPACE,
        "--reuse-values",
        "--set", "modelStorage.mode=per-service",
        "--set", "modelStorage.serviceCacheSize=1Gi",
        "--set", "modelStorage.maxServiceCacheSize=2Gi",
        "--wait", "--timeout", "4m",
    )  # fmt: skip
    TIMINGS["per-service: helm upgrade --wait -> controller rolled (s)"] = watch.seconds()

    def rolled() -> dict[str, Any] | None:
        pods = ready_pods(admin, ns, SELECTOR)
        every = admin.list("v1", "Pod", ns, label_selector=SELECTOR)
        if len(pods) != 1 or len(every) != 1:
            return None
        volumes = pods[0]["spec"]["volumes"]
        claims = [v["persistentVolumeClaim"]["claimName"] for v in volumes if "persistentVolumeClaim" in v]
        return pods[0] if claims == [own_claim] else None

    pod: dict[str, Any] = wait_for(rolled, within=300, what=f"one Ready pod on the claim {own_claim}")
    TIMINGS["per-service: helm upgrade -> the service's pod Ready on its own claim (s)"] = watch.seconds()
    assert not [v for v in pod["spec"]["volumes"] if "emptyDir" in v and v["name"] == "model-storage"]

    # The service's own claim: bound to a node volume, owned by the service, the size the chart gave.
    service = admin.get(API, "InferenceService", NAME, ns)
    assert service["status"]["phase"] == "Ready", service["status"]
    claim = admin.get("v1", "PersistentVolumeClaim", own_claim, ns)
    assert claim["status"]["phase"] == "Bound", claim["status"]
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "InferenceService",
        NAME,
        service["metadata"]["uid"],
        True,
    ), owner
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert claim["spec"]["volumeName"] != namespace_claim["spec"]["volumeName"]

    # Its pod's downloader put the model on that volume (a fresh download: the claim was empty).
    (init,) = pod["status"]["initContainerStatuses"]
    assert init["name"] == "model-downloader" and init["state"]["terminated"]["exitCode"] == 0, init
    code, log = admin.get_text(
        f"/api/v1/namespaces/{ns}/pods/{pod['metadata']['name']}/log?container=model-downloader"
    )
    assert code == 200 and "(1 downloaded, 0 cache hits)" in log, log
    args = pod["spec"]["containers"][0]["args"]
    model_path = Path(args[args.index("--model") + 1])
    volume = admin.get("v1", "PersistentVolume", claim["spec"]["volumeName"])
    cached = Path(volume["spec"]["hostPath"]["path"]) / model_path.relative_to("/models")
    served = node_cluster.workdir / "model-files" / MODEL_FILE  # what the model source serves
    assert cached.read_bytes() == served.read_bytes()
    deploy_and_chat(node_cluster, model_source, ns, "per-service")

    # Deleting the service deletes its claim; the namespace's claim is the one it was.
    watch = Stopwatch()
    admin.delete(API, "InferenceService", NAME, ns)
    wait_for(
        lambda: (
            admin.get_or_none("v1", "PersistentVolumeClaim", own_claim, ns) is None
            and not admin.list("v1", "Pod", ns, label_selector=SELECTOR)
        ),
        within=180,
        what=f"the pods of the deleted service and its claim {own_claim} gone",
    )
    TIMINGS["per-service: service deleted -> its claim gone (s)"] = watch.seconds()
    kept = admin.get("v1", "PersistentVolumeClaim", "llmkube-model-cache", ns)
    assert kept["metadata"]["uid"] == namespace_claim["metadata"]["uid"]
    assert "deletionTimestamp" not in kept["metadata"], kept["metadata"]
    assert kept["status"]["phase"] == "Bound"
    assert kept["spec"]["volumeName"] == namespace_claim["spec"]["volumeName"]
