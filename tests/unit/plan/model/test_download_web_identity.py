"""The model downloader's web identity (spec.webIdentity, or what IRSA's webhook injects): the
projected token goes to STS (a stand-in: llmkube_testing.sts_standin, a real HTTP server) in a POST
body, the temporary keys it answers sign the S3 requests with their session token, renewed before
they expire; STS's refusals are reported in its words. The S3 side here is a small recording
server (what each request carried); tests/integration/test_model_s3_web_identity.py does the same
against MinIO, which checks the signatures."""

import http.server
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from llmkube_testing.sts_standin import StsStandIn, running_sts

from llmkube.api.model import Model
from llmkube.plan.model.download_scripts import EXIT_PERMANENT, downloader_script
from llmkube.plan.model.downloader import (
    IDENTITY_MOUNT,
    IDENTITY_TOKEN_FILE,
    DownloadTarget,
    download_env,
    identity_mount,
    identity_volume,
)
from llmkube.plan.model.remote import RemoteSource, remote_source

pytestmark = pytest.mark.skipif(
    shutil.which("sh") is None or shutil.which("curl") is None, reason="needs sh and curl"
)
ROLE = "arn:aws:iam::123456789012:role/models-reader"
TOKEN = "eyJhbGciOiJSUzI1NiJ9.projected-service-account-token.signature"
FILES = {"m-00001-of-00002.gguf": os.urandom(50_000), "m-00002-of-00002.gguf": os.urandom(40_000)}


@dataclass
class Seen:
    path: str
    authorization: str
    security_token: str


@dataclass
class Bucket:
    objects: dict[str, bytes]
    seen: list[Seen] = field(default_factory=list)
    delay: float = 0.0
    endpoint: str = ""


@pytest.fixture
def bucket() -> Iterator[Bucket]:
    state = Bucket({f"/models/tiny/{name}": body for name, body in FILES.items()})

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            state.seen.append(
                Seen(
                    self.path,
                    self.headers.get("Authorization", ""),
                    self.headers.get("x-amz-security-token", ""),
                )
            )
            if state.delay:
                time.sleep(state.delay)
            body = state.objects.get(self.path)
            if not self.headers.get("x-amz-security-token") or body is None:
                error = b"<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
                self.send_response(403)
                self.send_header("Content-Length", str(len(error)))
                self.end_headers()
                self.wfile.write(error)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", '"e1"')
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def sts() -> Iterator[StsStandIn]:
    with running_sts(token=TOKEN, role=ROLE) as standin:
        yield standin


def web_identity_model() -> Model:
    return Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml"},
            "spec": {
                "source": "s3://models/tiny",
                "files": list(FILES),
                "sourceSecretRef": {"name": "s3-place"},
                "webIdentity": {"roleArn": ROLE},
            },
        }
    )


def planned_env(
    bucket: Bucket, sts: StsStandIn, cache: Path, token_file: Path, **extra: str
) -> dict[str, str]:
    remote = remote_source(web_identity_model(), "")
    assert isinstance(remote, RemoteSource)
    target = DownloadTarget(remote, "s3://models/tiny", str(cache), None, on_change=False, hf_endpoint="")
    env = {str(item["name"]): str(item.get("value", "")) for item in download_env(target)}
    assert env["AWS_ROLE_ARN"] == ROLE and env["AWS_WEB_IDENTITY_TOKEN_FILE"] == IDENTITY_TOKEN_FILE
    # The Secret's keys (envFrom: where the bucket is, no credentials), then the planned env; the
    # token file where the kubelet would have projected it.
    secret = {
        "AWS_REGION": "eu-central-1",
        "AWS_ENDPOINT_URL": bucket.endpoint,
        "AWS_ENDPOINT_URL_STS": sts.endpoint,
    }
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        **secret,
        **env,
        "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
        **extra,
    }


def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = downloader_script(local_source=False, custom_ca=False)
    return subprocess.run(["sh", "-c", script], env=env, capture_output=True, text=True, timeout=60)


def token_file(tmp_path: Path, token: str = TOKEN) -> Path:
    path = tmp_path / "token"
    path.write_text(token)
    return path


def test_the_pod_spec_projects_the_token_for_the_audience() -> None:
    remote = remote_source(web_identity_model(), "")
    assert isinstance(remote, RemoteSource) and remote.identity is not None
    assert identity_volume(remote) == [
        {
            "name": "web-identity-token",
            "projected": {
                "sources": [
                    {
                        "serviceAccountToken": {
                            "audience": "sts.amazonaws.com",
                            "expirationSeconds": 3600,
                            "path": "token",
                        }
                    }
                ]
            },
        }
    ]
    assert identity_mount(remote) == [
        {"name": "web-identity-token", "mountPath": IDENTITY_MOUNT, "readOnly": True}
    ]


def test_the_token_is_exchanged_and_the_temporary_keys_sign_every_request(
    bucket: Bucket, sts: StsStandIn, tmp_path: Path
) -> None:
    cache = tmp_path / "key"
    result = run(planned_env(bucket, sts, cache, token_file(tmp_path)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert all((cache / name).read_bytes() == body for name, body in FILES.items())
    [call] = sts.calls
    assert (call.action, call.role, call.token, call.session_name) == (
        "AssumeRoleWithWebIdentity",
        ROLE,
        TOKEN,
        "llmkube-model-downloader",
    )
    assert call.issued is not None
    for seen in bucket.seen:
        assert seen.security_token == call.issued.session_token
        assert re.match(
            rf"AWS4-HMAC-SHA256 Credential={call.issued.access_key}/\d{{8}}/eu-central-1/s3/aws4_request,",
            seen.authorization,
        ), seen.authorization
    assert len(bucket.seen) == 4  # a probe and a download per file
    out = result.stdout + result.stderr
    assert TOKEN not in out and call.issued.secret_key not in out and call.issued.session_token not in out


def test_the_keys_are_renewed_before_they_expire(bucket: Bucket, sts: StsStandIn, tmp_path: Path) -> None:
    bucket.delay = 1.2  # each request outlives a session of one second
    env = planned_env(bucket, sts, tmp_path / "key", token_file(tmp_path), LLMKUBE_WEB_IDENTITY_SECONDS="1")
    result = run(env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(sts.calls) == 4  # before each of the four requests
    sessions = [call.issued.session_token for call in sts.calls if call.issued is not None]
    assert [seen.security_token for seen in bucket.seen] == sessions


@pytest.mark.parametrize(
    ("token", "role", "code", "words"),
    [
        (
            "not-the-token",
            ROLE,
            EXIT_PERMANENT,
            "HTTP 400 InvalidIdentityToken: The web identity token is not valid",
        ),
        (
            TOKEN,
            "arn:aws:iam::123456789012:role/other",
            EXIT_PERMANENT,
            "HTTP 403 AccessDenied: Not authorized",
        ),
    ],
)
def test_a_refusal_is_said_in_sts_s_words_and_not_retried(
    bucket: Bucket, sts: StsStandIn, tmp_path: Path, token: str, role: str, code: int, words: str
) -> None:
    env = planned_env(bucket, sts, tmp_path / "key", token_file(tmp_path, token), AWS_ROLE_ARN=role)
    result = run(env)
    assert result.returncode == code, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert last.startswith(
        f"llmkube-download: failed: STS at {sts.endpoint} refused the web identity for {role}: "
    )
    assert words in last
    assert bucket.seen == []


def test_sts_unavailable_is_retried(bucket: Bucket, sts: StsStandIn, tmp_path: Path) -> None:
    sts.unavailable = 2
    result = run(planned_env(bucket, sts, tmp_path / "key", token_file(tmp_path)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert sts.refused_calls == 2 and len(sts.calls) == 1
    assert all((tmp_path / "key" / name).exists() for name in FILES)


def test_a_missing_token_file_says_so(bucket: Bucket, sts: StsStandIn, tmp_path: Path) -> None:
    result = run(planned_env(bucket, sts, tmp_path / "key", tmp_path / "absent"))
    assert result.returncode == EXIT_PERMANENT
    assert result.stdout.splitlines()[-1] == (
        f"llmkube-download: failed: the web identity token {tmp_path / 'absent'} cannot be read"
    )
    assert sts.calls == [] and bucket.seen == []


def test_static_keys_win_as_in_the_aws_sdks(bucket: Bucket, sts: StsStandIn, tmp_path: Path) -> None:
    env = planned_env(
        bucket,
        sts,
        tmp_path / "key",
        token_file(tmp_path),
        AWS_ACCESS_KEY_ID="AKIASTATIC",
        AWS_SECRET_ACCESS_KEY="static-secret",
        AWS_SESSION_TOKEN="static-session",
    )
    result = run(env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sts.calls == []
    assert all("Credential=AKIASTATIC/" in seen.authorization for seen in bucket.seen)


def test_web_identity_is_for_s3_sources_only() -> None:
    model = Model.model_validate(
        {
            "metadata": {"name": "m"},
            "spec": {"source": "https://x.example/m.gguf", "webIdentity": {"roleArn": ROLE}},
        }
    )
    problem = remote_source(model)
    assert not isinstance(problem, RemoteSource) and problem is not None
    assert (problem.field, problem.message) == (
        "spec.webIdentity",
        "only s3:// sources are read with a web identity",
    )


@pytest.fixture
def pod_identity_agent() -> Iterator[tuple[str, list[str]]]:
    """A stand-in for EKS Pod Identity's node agent: keys for the pod's token, as JSON."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            ok = self.headers.get("Authorization") == TOKEN
            body = (
                b'{"AccessKeyId": "ASIAPODIDENTITY", "SecretAccessKey": "pod-secret",\n'
                b' "Token": "pod-session", "AccountId": "123456789012", "Expiration": "2026-12-08T06:00:00Z"}'
                if ok
                else b'{"code": "AccessDeniedException", "message": "token is not valid"}'
            )
            self.send_response(200 if ok else 403)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/credentials", seen
    server.shutdown()
    server.server_close()


def pod_identity_env(bucket: Bucket, cache: Path, uri: str, token: Path) -> dict[str, str]:
    """A pod EKS Pod Identity's webhook prepared: its two variables, no webIdentity, no keys."""
    model = Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ml"},
            "spec": {"source": "s3://models/tiny", "files": list(FILES)},
        }
    )
    remote = remote_source(model, "")
    assert isinstance(remote, RemoteSource)
    target = DownloadTarget(remote, "s3://models/tiny", str(cache), None, on_change=False, hf_endpoint="")
    env = {str(item["name"]): str(item.get("value", "")) for item in download_env(target)}
    injected = {
        "AWS_CONTAINER_CREDENTIALS_FULL_URI": uri,
        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": str(token),
    }
    where = {"AWS_REGION": "eu-central-1", "AWS_ENDPOINT_URL": bucket.endpoint}
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **injected, **where, **env}


def test_eks_pod_identity_keys_sign_the_requests(
    bucket: Bucket, pod_identity_agent: tuple[str, list[str]], tmp_path: Path
) -> None:
    uri, seen = pod_identity_agent
    result = run(pod_identity_env(bucket, tmp_path / "key", uri, token_file(tmp_path)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert seen == [TOKEN]
    assert all(s.security_token == "pod-session" for s in bucket.seen) and len(bucket.seen) == 4
    assert all("Credential=ASIAPODIDENTITY/" in s.authorization for s in bucket.seen)
    assert TOKEN not in result.stdout + result.stderr and "pod-secret" not in result.stdout + result.stderr


def test_eks_pod_identity_refusal_is_said(
    bucket: Bucket, pod_identity_agent: tuple[str, list[str]], tmp_path: Path
) -> None:
    uri, _ = pod_identity_agent
    result = run(pod_identity_env(bucket, tmp_path / "key", uri, token_file(tmp_path, "stale")))
    assert result.returncode == EXIT_PERMANENT, result.stdout + result.stderr
    last = result.stdout.splitlines()[-1]
    assert (
        last
        == f"llmkube-download: failed: the pod identity agent at {uri} refused: HTTP 403: token is not valid"
    )
    assert bucket.seen == []
