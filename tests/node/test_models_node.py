"""s3:// Models on the real node: a real S3 server (MinIO, llmkube_testing/s3server.py) in the node's
network, on the node's address where the pods reach it, holds the tiny GGUF split in two shards in
a private bucket; the Models name a Secret with its keys (`sourceSecretRef`), which only the
downloader gets.

- A Model for the shards and a llama.cpp InferenceService: the init container stages both shards
  (SigV4, the server's region), llama-server loads the model from the first and answers.
- `prefetch: true`: the Model's Job stages the shards before any service exists; the first serving
  pod's downloader finds them (its log says cache hit) and the S3 server hears nothing from it.
- A pod killed in the middle of its download (the S3 answers come through a throttling relay,
  llmkube_testing/tcpproxy.py, so the kill lands mid-file): its replacement resumes the `.part`
  file where the killed one left it, the files are whole, and no `.part` or other stray file stays.

hf:// Models on the same node: the Hub stand-in (llmkube_testing/hfhub.py) on the node's address,
at the port of the controller's `--hf-endpoint` (tests/node/overlay), holds the same shards in a
private repository; the Model names a Secret with `HF_TOKEN`, which only the downloader gets.

- An `hf://org/repo@commit` Model of the shards and a llama.cpp service: the downloader stages both
  (each a redirect to the storage host, the token on every request the Hub sees), llama-server loads
  the first and answers; the token is nowhere in the pod's spec, the Model's status or the Events.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shutil
import socket
import threading
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest
import yaml
from llmkube_testing.hfhub import HubState, running_hub
from llmkube_testing.node import NodeCluster
from llmkube_testing.rest import KubeRest, condition_true
from llmkube_testing.s3server import MinioServer, minio_binary
from llmkube_testing.tcpproxy import TcpProxy
from llmkube_testing.tiny_gguf import write_tiny_gguf_shards
from llmkube_testing.tiny_service import chat_request, tiny_llamacpp
from node_support import (
    API,
    CONTROLLER_NAMESPACE,
    TIMINGS,
    Stopwatch,
    eventually_http,
    namespace_gone_after,
    wait_for,
)

from llmkube.plan.inferenceservice.names import CACHE_PVC_NAME
from llmkube.plan.model.downloader import NAME as DOWNLOADER
from llmkube.plan.model.prefetch import LABEL_PREFETCH
from llmkube.plan.model.source import cache_key

pytestmark = pytest.mark.tools  # MinIO, from hack/build-tools.sh

T = TypeVar("T")
BUCKET = "private-models"
PREFIX = "tiny/v1"
SOURCE = f"s3://{BUCKET}/{PREFIX}"
SECRET = "s3-credentials"
NAME = "sharded"
SELECTOR = f"inference.llmkube.dev/service={NAME}"
#: The killed download's first shard takes about this long through the throttle.
THROTTLED_SECONDS = 15
HF_REPO = "llmkube-test/tiny-split"
HF_SECRET = "hf-token"
HF_TOKEN = "hf_node_tier_token_5b1e"


@dataclass
class Shards:
    shards: dict[str, bytes]  # in order: the first is the one llama.cpp loads

    @property
    def names(self) -> list[str]:
        return list(self.shards)

    @property
    def total(self) -> int:
        return sum(len(body) for body in self.shards.values())


@dataclass
class S3Stand(Shards):
    server: MinioServer

    def gets(self) -> float:
        """GetObject requests the server answered so far (its own count)."""
        return self.server.requests().get("GetObject", 0.0)


def free_port_pair(node: NodeCluster) -> int:
    """A port of the node's address, inside its network, whose next port is free too (MinIO's
    console listens there)."""
    host = node.layout.node_ip

    def pick() -> int | None:
        with socket.socket() as first, socket.socket() as second:
            first.bind((host, 0))
            port = int(first.getsockname()[1])
            try:
                second.bind((host, port + 1))
            except OSError:
                return None
            return port

    port: int = wait_for(lambda: node.network.run_inside(pick), within=10, what="two free ports")
    return port


@pytest.fixture(scope="module")
def s3(node_cluster: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Stand]:
    """MinIO in the node's network on the node's address; this process reaches it by a forward."""
    if not minio_binary().is_file():
        pytest.fail(
            f"{minio_binary()} is missing. Build it with: bash hack/build-tools.sh minio", pytrace=False
        )
    node_ip = node_cluster.layout.node_ip
    port = free_port_pair(node_cluster)
    forward = node_cluster.forward((node_ip, port))
    workdir = tmp_path_factory.mktemp("s3")
    server = MinioServer(
        workdir / "minio-data",
        host=node_ip,
        port=port,
        preexec_fn=node_cluster.network.child_setup(),
        reach=f"http://{forward.address}",
    )
    try:
        server.start()
        server.make_bucket(BUCKET)
        (workdir / "gguf").mkdir()
        written = write_tiny_gguf_shards(workdir / "gguf" / "tiny.gguf")
        shards = {path.name: path.read_bytes() for path in written}
        for name, body in shards.items():
            server.put(BUCKET, f"{PREFIX}/{name}", body)
        yield S3Stand(shards=shards, server=server)
    finally:
        server.stop()
        forward.close()
        shutil.rmtree(workdir, ignore_errors=True)


@dataclass
class HubStand(Shards):
    hub: HubState
    commit: str

    @property
    def source(self) -> str:
        return f"hf://{HF_REPO}@{self.commit}"


def hf_endpoint_of(admin: KubeRest) -> tuple[str, int]:
    """Where the controller's `--hf-endpoint` (tests/node/overlay) says the Hub is."""
    deployment = admin.get("apps/v1", "Deployment", "llmkube-controller", CONTROLLER_NAMESPACE)
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    (flag,) = [arg for arg in args if arg.startswith("--hf-endpoint=")]
    url = urlsplit(flag.removeprefix("--hf-endpoint="))
    assert url.hostname and url.port, flag
    return url.hostname, url.port


@pytest.fixture(scope="module")
def hf(
    node_cluster: NodeCluster, controller: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HubStand]:
    """The Hub stand-in in the node's network, where the controller's `--hf-endpoint` points: the
    shards in a private repository (LFS files, each a redirect to the storage host)."""
    host, port = hf_endpoint_of(node_cluster.admin())
    assert host == node_cluster.layout.node_ip, host
    workdir = tmp_path_factory.mktemp("hf")
    written = write_tiny_gguf_shards(workdir / "tiny.gguf")
    shards = {path.name: path.read_bytes() for path in written}
    opened = running_hub(host, port)
    # Its listening socket is opened inside the node's network, where the pods reach it.
    state = node_cluster.network.run_inside(opened.__enter__)
    try:
        state.tokens = frozenset({HF_TOKEN})
        repo = state.add(HF_REPO, shards, private=True)
        assert all(len(body) >= state.lfs_threshold for body in shards.values())
        yield HubStand(shards=shards, hub=state, commit=repo.commit)
    finally:
        opened.__exit__(None, None, None)
        shutil.rmtree(workdir, ignore_errors=True)


class InsideLoop:
    """An asyncio loop on a thread that joined the node's network: what it opens is opened there."""

    def __init__(self, node: NodeCluster) -> None:
        self.loop = asyncio.new_event_loop()
        joined = threading.Event()

        def run() -> None:
            node.network.enter_current_thread()
            asyncio.set_event_loop(self.loop)
            joined.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, name="s3-relay", daemon=True)
        self.thread.start()
        assert joined.wait(10), "the relay's thread did not join the node's network"

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=30)

    def call(self, fn: Any, *args: Any) -> None:
        self.loop.call_soon_threadsafe(fn, *args)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module")
def relay(node_cluster: NodeCluster, s3: S3Stand) -> Iterator[tuple[InsideLoop, TcpProxy]]:
    """A TCP relay in front of the S3 server, on the node's address: the pods' downloads through it
    can be throttled."""
    loop = InsideLoop(node_cluster)
    node_ip = node_cluster.layout.node_ip
    proxy = loop.run(TcpProxy.start(node_ip, s3.server.port, host=node_ip))
    try:
        yield loop, proxy
    finally:
        loop.run(proxy.close())
        loop.close()


@pytest.fixture
def models_namespace(node_cluster: NodeCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace, deleted after the test, and gone before the next starts (one still
    terminating makes the controller's writes there refused, which other modules count)."""
    yield from namespace_gone_after(node_cluster, request, within=180)


# -- the objects ---------------------------------------------------------------------------------


def secret(namespace: str, stand: S3Stand, endpoint: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET, "namespace": namespace},
        "stringData": stand.server.credentials.secret_data(endpoint),
    }


def objects(namespace: str, stand: S3Stand, **model_spec: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Model of the shards in the bucket, and the tiny llama.cpp service on it."""
    model, service = tiny_llamacpp(namespace, NAME, SOURCE)
    model["spec"].update({"files": stand.names, "sourceSecretRef": {"name": SECRET}, **model_spec})
    return model, service


def apply(node: NodeCluster, *docs: dict[str, Any]) -> None:
    node.kubectl_run("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(docs))


# -- what the tests look at ----------------------------------------------------------------------


def the_ready_pod(admin: KubeRest, namespace: str) -> dict[str, Any] | None:
    """The only pod of the service, once it is Ready and the service says so."""
    pods = [
        p
        for p in admin.list("v1", "Pod", namespace, label_selector=SELECTOR)
        if not p["metadata"].get("deletionTimestamp")
    ]
    service = admin.get(API, "InferenceService", NAME, namespace)
    if len(pods) != 1 or not condition_true(pods[0], "Ready"):
        return None
    return pods[0] if (service.get("status") or {}).get("phase") == "Ready" else None


def complete(node: NodeCluster, admin: KubeRest, namespace: str) -> dict[str, Any]:
    service = admin.get("v1", "Service", NAME, namespace)
    url = f"http://{service['spec']['clusterIP']}:8080/v1/chat/completions"
    answer: dict[str, Any] = eventually_http(node, url, chat_request()).json()
    assert answer["object"] == "chat.completion"
    assert answer["usage"]["completion_tokens"] > 0, answer
    return answer


def log_of(admin: KubeRest, namespace: str, pod: str, container: str = DOWNLOADER) -> str:
    code, text = admin.get_text(f"/api/v1/namespaces/{namespace}/pods/{pod}/log?container={container}")
    assert code == 200, text
    return text


def model_arg(pod: dict[str, Any]) -> str:
    (server,) = pod["spec"]["containers"]
    args = list(server["args"])
    return str(args[args.index("--model") + 1])


def bound_cache_dir(admin: KubeRest, namespace: str, source: str = SOURCE) -> Path | None:
    """The Model's directory in the namespace's cache claim, where the node keeps it (hostPath),
    once the claim is bound."""
    claim = admin.get_or_none("v1", "PersistentVolumeClaim", CACHE_PVC_NAME, namespace)
    if claim is None or (claim.get("status") or {}).get("phase") != "Bound":
        return None
    volume = admin.get("v1", "PersistentVolume", claim["spec"]["volumeName"])
    return Path(volume["spec"]["hostPath"]["path"]) / cache_key(source)


def cache_dir_on_host(admin: KubeRest, namespace: str, source: str = SOURCE) -> Path:
    directory = bound_cache_dir(admin, namespace, source)
    assert directory is not None, f"the cache claim of {namespace} is not bound"
    return directory


def assert_whole_and_tidy(directory: Path, stand: Shards) -> None:
    """The shards as uploaded, their ETags and the lock: no `.part`, no probe leftovers."""
    for name, body in stand.shards.items():
        assert hashlib.sha256((directory / name).read_bytes()).hexdigest() == hashlib.sha256(body).hexdigest()
    found = sorted(p.name for p in directory.iterdir())
    expected = sorted([*stand.names, *(f".{name}.etag" for name in stand.names), ".llmkube.lock"])
    assert found == expected, found
    assert not list(directory.parent.rglob("*.part"))


def init_seconds(pod: dict[str, Any]) -> float:
    """How long the downloader ran (the kubelet's start and finish, to the second)."""
    (status,) = pod["status"]["initContainerStatuses"]
    assert status["name"] == DOWNLOADER
    terminated = status["state"]["terminated"]
    assert terminated["exitCode"] == 0, terminated
    started, finished = (datetime.fromisoformat(terminated[k]) for k in ("startedAt", "finishedAt"))
    return (finished - started).total_seconds()


def done_line(stand: Shards, downloaded: int, hits: int, source: str = SOURCE) -> str:
    files = len(stand.shards)
    return (
        f"llmkube-download: done: {files} files, {stand.total} bytes in /models/{cache_key(source)} "
        f"({downloaded} downloaded, {hits} cache hits)"
    )


# -- the tests -----------------------------------------------------------------------------------


def test_a_sharded_gguf_from_a_private_bucket_is_served(
    node_cluster: NodeCluster, controller: str, s3: S3Stand, models_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), models_namespace
    # The bucket is private: without a signature the server refuses.
    anonymous = s3.server.request("GET", f"/{BUCKET}/{PREFIX}/{s3.names[0]}", sign=False)
    assert (anonymous.status, anonymous.code) == (403, "AccessDenied")
    before = s3.gets()
    model, service = objects(ns, s3)

    watch = Stopwatch()
    apply(node_cluster, secret(ns, s3, s3.server.endpoint), model, service)
    pod = wait_for(lambda: the_ready_pod(admin, ns), within=300, what="the service Ready with one Ready pod")
    TIMINGS["s3 shards: apply -> Ready, downloading (s)"] = watch.seconds()
    complete(node_cluster, admin, ns)
    TIMINGS["s3 shards: apply -> first completion (s)"] = watch.seconds()
    TIMINGS["s3 shards: downloader ran, downloading (s)"] = init_seconds(pod)

    # llama-server loaded the model from the first shard, the second beside it.
    directory = f"/models/{cache_key(SOURCE)}"
    assert model_arg(pod) == f"{directory}/{s3.names[0]}"
    log = log_of(admin, ns, pod["metadata"]["name"])
    assert log.splitlines()[-1] == done_line(s3, downloaded=2, hits=0), log
    assert_whole_and_tidy(cache_dir_on_host(admin, ns), s3)
    # A ranged probe and a download per shard, each a GetObject the server counted.
    assert s3.gets() - before == 2 * len(s3.shards)
    # The keys reach the downloader only, from the Secret (envFrom), never as values in the pod.
    (downloader,) = pod["spec"]["initContainers"]
    assert downloader["envFrom"] == [{"secretRef": {"name": SECRET}}]
    secret_key = s3.server.credentials.secret_key
    assert secret_key not in yaml.safe_dump(pod["spec"]) and secret_key not in log
    (server,) = pod["spec"]["containers"]
    assert "envFrom" not in server
    TIMINGS["s3 shards: bytes staged"] = float(s3.total)


def test_a_prefetched_model_starts_its_first_pod_from_the_cache(
    node_cluster: NodeCluster, controller: str, s3: S3Stand, models_namespace: str
) -> None:
    admin, ns = node_cluster.admin(), models_namespace
    model, service = objects(ns, s3, prefetch=True)

    watch = Stopwatch()
    apply(node_cluster, secret(ns, s3, s3.server.endpoint), model)

    def prefetched() -> dict[str, Any] | None:
        status = admin.get(API, "Model", NAME, ns).get("status") or {}
        available = next((c for c in status.get("conditions") or () if c["type"] == "Available"), None)
        ready = status.get("phase") == "Ready" and available and available["reason"] == "ModelPrefetched"
        return available if ready else None

    available = wait_for(prefetched, within=300, what="the Model Ready, prefetched")
    TIMINGS["s3 prefetch: apply Model -> Ready, prefetched (s)"] = watch.seconds()
    assert f"{len(s3.shards)} files, {s3.total} bytes" in available["message"], available
    (job_pod,) = admin.list("v1", "Pod", ns, label_selector=LABEL_PREFETCH)
    assert log_of(admin, ns, job_pod["metadata"]["name"]).splitlines()[-1] == done_line(s3, 2, 0)
    assert_whole_and_tidy(cache_dir_on_host(admin, ns), s3)

    before = s3.gets()
    watch = Stopwatch()
    apply(node_cluster, service)
    pod = wait_for(lambda: the_ready_pod(admin, ns), within=300, what="the service Ready with one Ready pod")
    TIMINGS["s3 prefetch: apply InferenceService -> Ready, cache hit (s)"] = watch.seconds()
    complete(node_cluster, admin, ns)
    TIMINGS["s3 prefetch: downloader ran, cache hit (s)"] = init_seconds(pod)

    log = log_of(admin, ns, pod["metadata"]["name"])
    assert f"llmkube-download: cache hit: all 2 files are in /models/{cache_key(SOURCE)}" in log, log
    assert log.splitlines()[-1] == done_line(s3, downloaded=0, hits=2), log
    # Not one request reached the server from the serving pod.
    assert s3.gets() == before


def test_a_pod_killed_mid_download_is_resumed_by_the_next_and_leaves_no_part_file(
    node_cluster: NodeCluster,
    controller: str,
    s3: S3Stand,
    relay: tuple[InsideLoop, TcpProxy],
    models_namespace: str,
) -> None:
    admin, ns = node_cluster.admin(), models_namespace
    loop, proxy = relay
    first, size = s3.names[0], len(s3.shards[s3.names[0]])
    model, service = objects(ns, s3)
    loop.call(proxy.throttle, size / THROTTLED_SECONDS)
    try:
        watch = Stopwatch()
        apply(node_cluster, secret(ns, s3, f"http://{proxy.address}"), model, service)

        # The first shard is on its way: a .part file that has some of it, not all.
        def partial() -> tuple[Path, int] | None:
            directory = bound_cache_dir(admin, ns)
            parts = list(directory.glob(f"{first}.*.part")) if directory and directory.is_dir() else []
            got = parts[0].stat().st_size if len(parts) == 1 else 0
            return (parts[0], got) if size // 4 <= got < size else None

        part, seen = wait_for(partial, within=300, what=f"a quarter of {first} downloaded", interval=0.2)
        # Nothing flows from now on (the next pod's requests wait too), and the pod is killed.
        loop.call(proxy.stall)
        (killed,) = admin.list("v1", "Pod", ns, label_selector=SELECTOR)
        name, killed_ip = killed["metadata"]["name"], killed["status"]["podIP"]
        admin.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", {"gracePeriodSeconds": 1})
        wait_for(
            lambda: admin.get_or_none("v1", "Pod", name, ns) is None, within=120, what=f"the pod {name} gone"
        )
        TIMINGS["s3 killed: apply -> pod killed mid-download, gone (s)"] = watch.seconds()
        left = part.stat().st_size
    finally:
        loop.call(proxy.throttle, None)
        loop.call(proxy.resume)
    assert seen <= left < size, (seen, left, size)

    pod = wait_for(lambda: the_ready_pod(admin, ns), within=300, what="the next pod Ready")
    TIMINGS["s3 killed: apply -> Ready after the retry (s)"] = watch.seconds()
    complete(node_cluster, admin, ns)
    assert pod["status"]["podIP"] != killed_ip, "the next pod has the killed one's address: cannot count"

    # The next pod took the .part file up where the killed one left it.
    log = log_of(admin, ns, pod["metadata"]["name"])
    resumed = re.search(
        rf"^llmkube-download: resuming {re.escape(first)} at (\d+) of {size} bytes$", log, re.M
    )
    assert resumed is not None, log
    offset = int(resumed[1])
    assert offset == left, (offset, left)
    assert log.splitlines()[-1] == done_line(s3, downloaded=2, hits=0), log
    assert_whole_and_tidy(cache_dir_on_host(admin, ns), s3)
    assert not part.exists()
    # What the next pod fetched (the relay counts by client address): the rest of the first shard,
    # the second, their probes' one byte each, and HTTP headers; never the part it already had.
    retried = proxy.relayed_to(pod["status"]["podIP"])
    assert proxy.relayed_to(killed_ip) >= left
    payload = (size - offset) + len(s3.shards[s3.names[1]]) + 2
    assert payload <= retried <= payload + 16 * 1024, (payload, retried)
    TIMINGS["s3 killed: bytes on disk when killed"] = float(offset)
    TIMINGS["s3 killed: bytes the retry fetched"] = float(retried)


def test_a_sharded_gguf_from_a_private_hub_repository_is_served(
    node_cluster: NodeCluster, controller: str, hf: HubStand, models_namespace: str
) -> None:
    admin, ns, source = node_cluster.admin(), models_namespace, hf.source
    first = hf.names[0]

    # The repository is private: without a token the Hub answers 401 (RepoNotFound).
    def anonymous() -> tuple[int, str | None]:
        try:
            urllib.request.urlopen(f"{hf.hub.base}/{HF_REPO}/resolve/{hf.commit}/{first}", timeout=10)
        except urllib.error.HTTPError as refused:
            return refused.code, refused.headers["X-Error-Code"]
        return 200, None

    assert node_cluster.network.run_inside(anonymous) == (401, "RepoNotFound")
    before = len(hf.hub.requests)
    model, service = tiny_llamacpp(ns, NAME, source)
    model["spec"].update({"files": hf.names, "sourceSecretRef": {"name": HF_SECRET}})
    token_secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": HF_SECRET, "namespace": ns},
        "stringData": {"HF_TOKEN": HF_TOKEN},
    }

    watch = Stopwatch()
    apply(node_cluster, token_secret, model, service)
    pod = wait_for(lambda: the_ready_pod(admin, ns), within=300, what="the service Ready with one Ready pod")
    TIMINGS["hf shards: apply -> Ready, downloading (s)"] = watch.seconds()
    complete(node_cluster, admin, ns)
    TIMINGS["hf shards: apply -> first completion (s)"] = watch.seconds()
    TIMINGS["hf shards: downloader ran, downloading (s)"] = init_seconds(pod)

    # llama-server loaded the model from the first shard; the staged files are the Hub's, byte for byte.
    assert model_arg(pod) == f"/models/{cache_key(source)}/{first}"
    log = log_of(admin, ns, pod["metadata"]["name"])
    assert log.splitlines()[-1] == done_line(hf, downloaded=2, hits=0, source=source), log
    directory = cache_dir_on_host(admin, ns, source)
    for name, body in hf.shards.items():
        assert (directory / name).read_bytes() == body, name
    assert_whole_and_tidy(directory, hf)

    # What the Hub saw: per shard a ranged probe and the download, each a GET of /resolve/ and one
    # of the storage host it redirects to; every one with the token. Nothing else (the controller
    # sends nothing for a Model whose credentials are in a Secret).
    seen = hf.hub.requests[before:]
    resolve = [f"/{HF_REPO}/resolve/{hf.commit}/{name}" for name in hf.names]
    storage = [f"/lfs/{hashlib.sha256(body).hexdigest()}" for body in hf.shards.values()]
    assert Counter(r.path for r in seen) == Counter({path: 2 for path in [*resolve, *storage]}), seen
    assert all(r.method == "GET" and r.authorized for r in seen), seen
    assert sum(r.range == "bytes=0-0" for r in seen) == 2 * len(hf.shards), seen

    # The token reaches the downloader only, from the Secret (envFrom), never as a value.
    (downloader,) = pod["spec"]["initContainers"]
    assert downloader["envFrom"] == [{"secretRef": {"name": HF_SECRET}}]
    assert {"name": "HF_ENDPOINT", "value": hf.hub.base} in downloader["env"]
    (server,) = pod["spec"]["containers"]
    assert "envFrom" not in server
    assert not any(variable["name"] == "HF_TOKEN" for variable in server.get("env") or ())
    assert HF_TOKEN not in yaml.safe_dump(pod["spec"]) and HF_TOKEN not in log
    status = admin.get(API, "Model", NAME, ns).get("status") or {}
    assert status.get("phase") == "Ready", status
    assert HF_TOKEN not in yaml.safe_dump(status)
    events = admin.list("v1", "Event", ns)
    assert events and HF_TOKEN not in yaml.safe_dump(events)
    TIMINGS["hf shards: bytes staged"] = float(hf.total)
    TIMINGS["hf shards: Hub requests"] = float(len(seen))
