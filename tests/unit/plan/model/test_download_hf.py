"""The model downloader against the Hub stand-in (llmkube_testing/hfhub.py), with the very
environment the planner gives the init container and the prefetch Job: a sharded GGUF and its
projector staged through the Hub's redirects, each LFS file checked against the SHA-256 the Hub
announces (X-Linked-Etag), a private repository refused in the Hub's words without HF_TOKEN
(exit 3: a Job does not retry it) and staged with it, the token never in its output."""

import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from llmkube_testing.hfhub import HubState, running_hub

from llmkube.api.model import Model
from llmkube.plan.model.download_scripts import EXIT_PERMANENT, downloader_script
from llmkube.plan.model.downloader import DownloadTarget, download_env
from llmkube.plan.model.remote import RemoteSource, remote_source

pytestmark = pytest.mark.skipif(
    shutil.which("sh") is None or shutil.which("curl") is None, reason="needs sh and curl"
)
SHARDS = ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]


@pytest.fixture
def hub() -> Iterator[HubState]:
    with running_hub() as state:
        state.lfs_threshold = 1024
        yield state


def planned_env(hub: HubState, source: str, cache: Path, **secret: str) -> dict[str, str]:
    model = Model.model_validate(
        {
            "metadata": {"name": "split", "namespace": "ml"},
            "spec": {"source": source, "files": SHARDS, "mmproj": "mmproj.gguf"},
        }
    )
    remote = remote_source(model, hub.base)
    assert isinstance(remote, RemoteSource)
    target = DownloadTarget(remote, source, str(cache), None, on_change=False, hf_endpoint=hub.base)
    env = {str(item["name"]): str(item.get("value", "")) for item in download_env(target)}
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env, **secret}


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = downloader_script(local_source=False, custom_ca=False)
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)


def test_a_sharded_gguf_and_its_projector_are_staged_from_the_hub(hub: HubState, tmp_path: Path) -> None:
    files = {SHARDS[0]: os.urandom(300_000), SHARDS[1]: os.urandom(200_000), "mmproj.gguf": b"p" * 100}
    hub.add("org/split", files)
    cache = tmp_path / "key"
    result = run(planned_env(hub, "hf://org/split@main", cache))
    assert result.returncode == 0, result.stdout + result.stderr
    for name, body in files.items():
        assert (cache / name).read_bytes() == body
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == sorted(files)
    assert result.stdout.splitlines()[-1] == (
        f"llmkube-download: done: 3 files, 500100 bytes in {cache} (3 downloaded, 0 cache hits)"
    )
    # The shards came from the storage host the Hub redirected to; the small projector in place.
    lfs = {r.path for r in hub.requests if r.path.startswith("/lfs/") and r.method == "GET"}
    assert lfs == {f"/lfs/{hashlib.sha256(files[name]).hexdigest()}" for name in SHARDS}


def test_a_shard_that_is_not_what_the_hub_announced_is_refused_and_not_published(
    hub: HubState, tmp_path: Path
) -> None:
    files = {SHARDS[0]: os.urandom(4096), SHARDS[1]: os.urandom(4096), "mmproj.gguf": b"p"}
    hub.add("org/split", files)
    original = hub.blob
    # The storage host serves other bytes than the SHA-256 the Hub announces (a corrupt mirror).
    hub.blob = lambda sha: None if original(sha) is None else b"\x00" * 4096  # type: ignore[method-assign]
    cache = tmp_path / "key"
    result = run(planned_env(hub, "hf://org/split", cache))
    assert result.returncode == EXIT_PERMANENT
    assert "has SHA-256" in result.stdout.splitlines()[-1]
    assert not (cache / SHARDS[0]).exists()
    assert not list(cache.glob("*.part"))


def test_a_private_repository_needs_the_token_which_is_never_printed(hub: HubState, tmp_path: Path) -> None:
    files = {SHARDS[0]: os.urandom(2048), SHARDS[1]: os.urandom(2048), "mmproj.gguf": b"p"}
    hub.add("org/private", files, private=True)
    cache = tmp_path / "key"
    refused = run(planned_env(hub, "hf://org/private", cache))
    assert refused.returncode == EXIT_PERMANENT
    last = refused.stdout.splitlines()[-1]
    assert last.startswith(
        f"llmkube-download: failed: {SHARDS[0]} from hf://org/private: HTTP 401 RepoNotFound"
    )
    assert not cache.joinpath(SHARDS[0]).exists()

    token = "hf_test_token"
    staged = run(planned_env(hub, "hf://org/private", cache, HF_TOKEN=token))
    assert staged.returncode == 0, staged.stdout + staged.stderr
    assert all((cache / name).read_bytes() == body for name, body in files.items())
    assert token not in staged.stdout + staged.stderr
    assert any(r.authorized for r in hub.requests)
