"""gs:// Models (public Cloud Storage objects, read through its XML API at /<bucket>/<object>),
against a stand-in Cloud Storage (llmkube_testing.fileserver serving a directory of buckets over
real HTTP, with ETags and ranges as Cloud Storage answers): the controller sizes the object and
reads its GGUF header with Range requests under the egress rules; the pods' downloader stages it."""

import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import aiohttp
import pytest
from llmkube_testing.fileserver import ModelFileHandler
from modelsource_support import GGUFFactory, loopback_allowed

from llmkube.api.model import Model, ModelStatus
from llmkube.controllers.modelsource import ModelSourceIO, drive_model_plan
from llmkube.plan.model import ModelFacts, ModelPlanConfig
from llmkube.plan.model.download_scripts import downloader_script
from llmkube.plan.model.downloader import DownloadTarget, download_env
from llmkube.plan.model.remote import RemoteSource, remote_source
from llmkube.plan.model.size import format_size
from llmkube.plan.model.source import SourceKind, classify_source, parse_s3_source


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "gcs"
    root.mkdir()
    handler = type("Handler", (ModelFileHandler,), {"directory": root, "log_message": lambda *a: None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", root
    server.shutdown()
    server.server_close()


def gs_model(source: str, **spec: object) -> Model:
    return Model.model_validate(
        {"metadata": {"name": "tiny", "namespace": "ml"}, "spec": {"source": source, **spec}}
    )


@pytest.mark.parametrize(
    ("source", "problem"),
    [
        ("gs://public-models/tiny/m.gguf", None),
        ("gs://my_bucket.example/m.gguf", None),
        ("gs://Bad/m.gguf", '"gs://Bad/m.gguf": "Bad" is not a Cloud Storage bucket name'),
        ("gs://public-models/", '"gs://public-models/" names no object: want gs://<bucket>/<key>'),
    ],
)
def test_gs_sources_parse(source: str, problem: str | None) -> None:
    assert classify_source(source) is SourceKind.GS
    parsed = parse_s3_source(source, prefix=False)
    if problem is None:
        assert not isinstance(parsed, str)
    else:
        assert isinstance(parsed, str) and parsed.startswith(problem)


def test_the_files_of_a_prefix_are_read_at_bucket_and_object() -> None:
    remote = remote_source(gs_model("gs://public-models/tiny", files=["a b.gguf"], mmproj="p.gguf"))
    assert isinstance(remote, RemoteSource) and remote.kind is SourceKind.GS
    assert [f.location for f in remote.files] == [
        "/public-models/tiny/a%20b.gguf",
        "/public-models/tiny/p.gguf",
    ]


async def test_the_controller_sizes_and_reads_the_header_of_a_public_object(
    storage: tuple[str, Path], make_gguf: GGUFFactory
) -> None:
    endpoint, root = storage
    (root / "public-models").mkdir()
    body = make_gguf("m.gguf", name="Cloud Llama").read_bytes()
    (root / "public-models" / "m.gguf").write_bytes(body)
    writes: list[ModelStatus] = []

    async def write(current: Model, status: ModelStatus) -> Model:
        writes.append(status)
        return current.model_copy(update={"status": status})

    async with aiohttp.ClientSession() as session:
        io = ModelSourceIO(session=session, policy=loopback_allowed, gcs_endpoint=endpoint)
        await drive_model_plan(
            gs_model("gs://public-models/m.gguf"),
            ModelFacts(),
            ModelPlanConfig(),
            io,
            write,
            clock=lambda: datetime(2026, 5, 1, tzinfo=UTC),
        )
    ready = writes[-1]
    assert ready.phase == "Ready", ready
    assert ready.size == format_size(len(body))
    assert ready.gguf is not None and ready.gguf.model_name == "Cloud Llama"


async def test_the_egress_rules_hold_for_gs_too(storage: tuple[str, Path]) -> None:
    endpoint, root = storage
    (root / "b").mkdir()
    (root / "b" / "m.gguf").write_bytes(b"GGUF")
    writes: list[ModelStatus] = []

    async def write(current: Model, status: ModelStatus) -> Model:
        writes.append(status)
        return current.model_copy(update={"status": status})

    async with aiohttp.ClientSession() as session:
        io = ModelSourceIO(session=session, gcs_endpoint=endpoint)  # the default policy: no loopback
        await drive_model_plan(
            gs_model("gs://bucket-x/m.gguf"),
            ModelFacts(),
            ModelPlanConfig(),
            io,
            write,
            clock=lambda: datetime(2026, 5, 1, tzinfo=UTC),
        )
    failed = writes[-1]
    assert failed.phase == "Failed"
    assert any(c.reason == "SourceNotAllowed" for c in failed.conditions or ())


@pytest.mark.skipif(shutil.which("sh") is None or shutil.which("curl") is None, reason="needs sh and curl")
def test_the_downloader_stages_a_prefix_from_cloud_storage(storage: tuple[str, Path], tmp_path: Path) -> None:
    endpoint, root = storage
    files = {"m-00001-of-00002.gguf": os.urandom(70_000), "m-00002-of-00002.gguf": os.urandom(30_000)}
    (root / "public-models" / "tiny").mkdir(parents=True)
    for name, body in files.items():
        (root / "public-models" / "tiny" / name).write_bytes(body)
    remote = remote_source(gs_model("gs://public-models/tiny", files=list(files)))
    assert isinstance(remote, RemoteSource)
    cache = tmp_path / "key"
    target = DownloadTarget(
        remote, "gs://public-models/tiny", str(cache), None, on_change=False, hf_endpoint=""
    )
    env = {str(item["name"]): str(item.get("value", "")) for item in download_env(target)}
    assert env["DOWNLOAD_KIND"] == "gs"
    # GCS_ENDPOINT_URL: where the Secret (or nothing: storage.googleapis.com) says Cloud Storage is
    run_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GCS_ENDPOINT_URL": endpoint, **env}
    script = downloader_script(local_source=False, custom_ca=False)
    result = subprocess.run(["sh", "-c", script], env=run_env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert all((cache / name).read_bytes() == body for name, body in files.items())
    assert result.stdout.splitlines()[-1].endswith("(2 downloaded, 0 cache hits)")
