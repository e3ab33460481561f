"""The model downloader's web identity against a real S3 server (MinIO, which checks every
signature and session token): a stand-in STS (llmkube_testing.sts_standin) takes the projected
ServiceAccount token and answers with real temporary keys, which it gets from MinIO's own STS
(`AssumeRole`, signed with the server's keys), so MinIO accepts the downloader's requests only if
they are signed with those keys and carry their session token. A token STS refuses stages nothing.
"""

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from llmkube_testing.s3server import MinioServer, minio_binary, running_minio
from llmkube_testing.sts_standin import Issued, StsStandIn, running_sts

from llmkube.api.model import Model
from llmkube.plan.model.download_scripts import EXIT_PERMANENT, downloader_script
from llmkube.plan.model.downloader import DownloadTarget, download_env
from llmkube.plan.model.remote import RemoteSource, remote_source

pytestmark = pytest.mark.tools  # MinIO, from hack/build-tools.sh

BUCKET = "private-models"
ROLE = "arn:aws:iam::123456789012:role/models-reader"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.projected.token"
FILES = {"tiny.gguf": os.urandom(120_000), "mmproj.gguf": os.urandom(9_000)}


@pytest.fixture(scope="module")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MinioServer]:
    if not os.access(minio_binary(), os.X_OK):
        pytest.fail(
            f"{minio_binary()} is missing. Build it with: bash hack/build-tools.sh minio", pytrace=False
        )
    with running_minio(tmp_path_factory.mktemp("s3")) as server:
        server.make_bucket(BUCKET)
        for name, body in FILES.items():
            server.put(BUCKET, f"web/{name}", body)
        yield server


def _xml(body: str, tag: str) -> str:
    return body.split(f"<{tag}>", 1)[1].split(f"</{tag}>", 1)[0]


def minio_temporary_keys(s3: MinioServer) -> Issued:
    """Real temporary keys from MinIO's STS (AssumeRole, signed with the server's keys)."""
    creds = s3.credentials
    config = f'user = "{creds.access_key}:{creds.secret_key}"\naws-sigv4 = "aws:amz:{creds.region}:sts"\n'
    with tempfile.NamedTemporaryFile() as out:
        argv = ["curl", "-K", "-", "-sS", "-o", out.name, "-w", "%{http_code}"]
        form = "Action=AssumeRole&Version=2011-06-15&DurationSeconds=900"
        result = subprocess.run(
            [*argv, "--data", form, "--url", f"{s3.client_endpoint}/"],
            input=config,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        body = Path(out.name).read_text()
    assert result.stdout == "200", body
    return Issued(_xml(body, "AccessKeyId"), _xml(body, "SecretAccessKey"), _xml(body, "SessionToken"))


@pytest.fixture
def sts(s3: MinioServer) -> Iterator[StsStandIn]:
    with running_sts(token=TOKEN, role=ROLE, issue=lambda _: minio_temporary_keys(s3)) as standin:
        yield standin


def planned_env(s3: MinioServer, sts: StsStandIn, cache: Path, token_file: Path) -> dict[str, str]:
    source = f"s3://{BUCKET}/web"
    model = Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml"},
            "spec": {
                "source": source,
                "files": ["tiny.gguf"],
                "mmproj": "mmproj.gguf",
                "sourceSecretRef": {"name": "where"},
                "webIdentity": {"roleArn": ROLE},
            },
        }
    )
    remote = remote_source(model, "")
    assert isinstance(remote, RemoteSource)
    env = download_env(DownloadTarget(remote, source, str(cache), None, on_change=False, hf_endpoint=""))
    planned = {str(item["name"]): str(item.get("value", "")) for item in env}
    # The Secret says where (no keys); the token is where the kubelet would project it.
    where = {
        "AWS_REGION": s3.credentials.region,
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ENDPOINT_URL_STS": sts.endpoint,
    }
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        **where,
        **planned,
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
    }


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = downloader_script(local_source=False, custom_ca=False)
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=120)


def test_the_files_are_staged_with_the_keys_the_web_identity_gets(
    s3: MinioServer, sts: StsStandIn, tmp_path: Path
) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    cache = tmp_path / "key"
    result = run(planned_env(s3, sts, cache, token))
    assert result.returncode == 0, result.stdout + result.stderr
    assert all((cache / name).read_bytes() == body for name, body in FILES.items())
    [call] = sts.calls
    assert call.token == TOKEN and call.role == ROLE and call.issued is not None
    out = result.stdout + result.stderr
    assert call.issued.secret_key not in out and call.issued.session_token not in out and TOKEN not in out


def test_a_token_sts_refuses_stages_nothing(s3: MinioServer, sts: StsStandIn, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-of-another-cluster")
    cache = tmp_path / "key"
    result = run(planned_env(s3, sts, cache, token))
    assert result.returncode == EXIT_PERMANENT, result.stdout + result.stderr
    assert "InvalidIdentityToken" in result.stdout.splitlines()[-1]
    assert not [p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".llmkube")]
