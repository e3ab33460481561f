"""The model downloader against a real S3 server: MinIO (llmkube_testing/s3server.py, built by
`hack/build-tools.sh minio`), with the very environment the planner gives the init container and
the prefetch Job, and the keys of the Model's `sourceSecretRef` as the kubelet hands them over
(`envFrom`).

A private bucket (anonymous reads are refused: AccessDenied) holds a sharded GGUF and its
projector; the downloader stages all three with SigV4 in the server's region. A wrong secret key,
an unknown access key and a wrong region are refused in the server's own words
(SignatureDoesNotMatch, InvalidAccessKeyId, AuthorizationHeaderMalformed), with exit 3, which a
prefetch Job does not retry, after one request each, counted by the server itself; nothing
is published. A missing object is NoSuchKey. The secret key never appears in the output.
"""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from llmkube_testing.s3server import Credentials, MinioServer, minio_binary, running_minio
from llmkube_testing.tiny_gguf import write_tiny_gguf_shards

from llmkube.api.model import Model
from llmkube.plan.model.download_scripts import EXIT_PERMANENT, downloader_script
from llmkube.plan.model.downloader import DownloadTarget, download_env
from llmkube.plan.model.remote import RemoteSource, remote_source

pytestmark = pytest.mark.tools  # MinIO, from hack/build-tools.sh

BUCKET = "private-models"
PREFIX = "tiny/v1"


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MinioServer]:
    if not os.access(minio_binary(), os.X_OK):
        pytest.fail(
            f"{minio_binary()} is missing. Build it with: bash hack/build-tools.sh minio", pytrace=False
        )
    with running_minio(tmp_path_factory.mktemp("s3")) as server:
        server.make_bucket(BUCKET)
        yield server


@pytest.fixture(scope="module")
def shards(s3: MinioServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """The tiny model in two shards and a projector, uploaded under PREFIX."""
    written = write_tiny_gguf_shards(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    files = {path.name: path.read_bytes() for path in written}
    files["mmproj-tiny-f16.gguf"] = os.urandom(70_000)
    for name, body in files.items():
        s3.put(BUCKET, f"{PREFIX}/{name}", body)
    return files


def planned_env(files: list[str], mmproj: str, cache: Path, secret: dict[str, str]) -> dict[str, str]:
    source = f"s3://{BUCKET}/{PREFIX}"
    model = Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml"},
            "spec": {"source": source, "files": files, "mmproj": mmproj, "sourceSecretRef": {"name": "s3"}},
        }
    )
    remote = remote_source(model, "")
    assert isinstance(remote, RemoteSource)
    target = DownloadTarget(remote, source, str(cache), None, on_change=False, hf_endpoint="")
    env = {str(item["name"]): str(item.get("value", "")) for item in download_env(target)}
    # envFrom first, then env: the kubelet lets `env` win, so the Secret cannot redirect the files.
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **secret, **env}


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = downloader_script(local_source=False, custom_ca=False)
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=120)


def gets(s3: MinioServer, series: str = "minio_api_requests_total") -> float:
    return s3.requests(series).get("GetObject", 0.0)


def test_the_bucket_is_private(s3: MinioServer, shards: dict[str, bytes]) -> None:
    name = next(iter(shards))
    anonymous = s3.request("GET", f"/{BUCKET}/{PREFIX}/{name}", sign=False)
    assert (anonymous.status, anonymous.code) == (403, "AccessDenied")
    signed = s3.request("GET", f"/{BUCKET}/{PREFIX}/{name}")
    assert (signed.status, signed.body) == (200, shards[name])


def test_a_sharded_gguf_and_its_projector_are_staged_with_sigv4(
    s3: MinioServer, shards: dict[str, bytes], tmp_path: Path
) -> None:
    names = sorted(n for n in shards if n.startswith("tiny-"))
    cache = tmp_path / "key"
    secret = s3.credentials.secret_data(s3.endpoint)
    before = gets(s3)
    result = run(planned_env(names, "mmproj-tiny-f16.gguf", cache, secret))
    assert result.returncode == 0, result.stdout + result.stderr
    for name, body in shards.items():
        assert (cache / name).read_bytes() == body
    total = sum(len(b) for b in shards.values())
    assert result.stdout.splitlines()[-1] == (
        f"llmkube-download: done: 3 files, {total} bytes in {cache} (3 downloaded, 0 cache hits)"
    )
    assert not list(cache.rglob("*.part"))
    # One ranged probe and one download per file, each counted by the server as a GetObject.
    assert gets(s3) - before == 6
    assert s3.credentials.secret_key not in result.stdout + result.stderr

    # Again: every file is a cache hit, and the server hears nothing.
    before = gets(s3)
    again = run(planned_env(names, "mmproj-tiny-f16.gguf", cache, secret))
    assert again.returncode == 0, again.stdout + again.stderr
    assert again.stdout.splitlines()[-1].endswith("(0 downloaded, 3 cache hits)")
    assert gets(s3) == before


@pytest.mark.parametrize(
    ("wrong", "refusal"),
    [
        ("secret", "HTTP 403 SignatureDoesNotMatch: The request signature we calculated does not match"),
        ("access key", "HTTP 403 InvalidAccessKeyId: The Access Key Id you provided does not exist"),
        (
            "region",
            "HTTP 400 AuthorizationHeaderMalformed: The authorization header is malformed;"
            " the region is wrong; expecting 'eu-central-1'.",
        ),
    ],
)
def test_wrong_credentials_fail_once_in_the_servers_words(
    s3: MinioServer, shards: dict[str, bytes], tmp_path: Path, wrong: str, refusal: str
) -> None:
    names = sorted(n for n in shards if n.startswith("tiny-"))
    good = s3.credentials
    creds = {
        "secret": Credentials(good.access_key, "not-the-secret-key-at-all", good.region),
        "access key": Credentials("nobody-knows-me", good.secret_key, good.region),
        "region": Credentials(good.access_key, good.secret_key, "us-west-2"),
    }[wrong]
    cache = tmp_path / "key"
    refused = "minio_api_requests_4xx_errors_total"
    before = (gets(s3), gets(s3, refused))
    result = run(planned_env(names, "mmproj-tiny-f16.gguf", cache, creds.secret_data(s3.endpoint)))
    after = (gets(s3), gets(s3, refused))

    assert result.returncode == EXIT_PERMANENT, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith(f"llmkube-download: failed: {names[0]} from s3://{BUCKET}/{PREFIX}: {refusal}"), (
        last
    )
    # No retry storm: the first file's probe is the only request, refused, and nothing is written.
    assert (after[0] - before[0], after[1] - before[1]) == (1, 1), (before, after)
    assert not [p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".llmkube")]
    assert creds.secret_key not in result.stdout + result.stderr


def test_a_missing_object_is_no_such_key(s3: MinioServer, shards: dict[str, bytes], tmp_path: Path) -> None:
    cache = tmp_path / "key"
    secret = s3.credentials.secret_data(s3.endpoint)
    result = run(planned_env(["tiny-00001-of-00003.gguf"], "mmproj-tiny-f16.gguf", cache, secret))
    assert result.returncode == EXIT_PERMANENT, result.stdout + result.stderr
    assert "HTTP 404 NoSuchKey" in result.stdout.splitlines()[-1]
