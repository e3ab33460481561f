"""HEAD fingerprints against a real local server, and the drift decision they feed."""

from pathlib import Path

import aiohttp
import pytest
from modelsource_support import ModelHost, loopback_allowed

from llmkube.controllers.modelsource import (
    probe_http_fingerprint,
    probe_local_fingerprint,
    probe_local_fingerprint_sync,
)
from llmkube.controllers.modelsource.fingerprint import parse_content_length
from llmkube.plan.model import DriftKind, Fingerprint, ProbeFailure, decide_drift

SHORT = aiohttp.ClientTimeout(total=0.2)


async def test_head_reports_etag_and_length(model_host: ModelHost, session: aiohttp.ClientSession) -> None:
    model_host.files["m.gguf"] = b"x" * 5000
    outcome = await probe_http_fingerprint(session, model_host.url("/ranged/m.gguf"), policy=loopback_allowed)
    assert outcome.failure is None
    assert outcome.fingerprint is not None
    assert outcome.fingerprint.content_length == 5000
    assert outcome.fingerprint.etag is not None and outcome.fingerprint.etag.startswith('"1388-')
    assert (model_host.head_requests, model_host.body_bytes_sent) == (1, 0)  # a HEAD, no body


async def test_a_changed_etag_is_drift(model_host: ModelHost, session: aiohttp.ClientSession) -> None:
    url = model_host.url("/changing")
    first = await probe_http_fingerprint(session, url, policy=loopback_allowed)
    second = await probe_http_fingerprint(session, url, policy=loopback_allowed)
    assert first.fingerprint == Fingerprint(etag='"v1"', content_length=4096)
    assert second.fingerprint == Fingerprint(etag='"v2"', content_length=4096)
    baseline = decide_drift(None, None, first)
    assert baseline.kind is DriftKind.BASELINE
    assert decide_drift(baseline.etag, baseline.content_length, second).kind is DriftKind.DRIFTED
    assert decide_drift(baseline.etag, baseline.content_length, first).kind is DriftKind.IN_SYNC


@pytest.mark.parametrize(
    ("path", "failure", "detail_end"),
    [
        ("/ranged/absent.gguf", ProbeFailure.NOT_FOUND, "404 Not Found"),
        ("/status/503", ProbeFailure.SERVER_ERROR, "503 Service Unavailable"),
        ("/status/500", ProbeFailure.SERVER_ERROR, "500 Internal Server Error"),
        # A refusal of these credentials (or of none): the planner fails a Model not yet Ready on it.
        ("/status/403", ProbeFailure.UNAUTHORIZED, "403 Forbidden"),
        ("/status/401", ProbeFailure.UNAUTHORIZED, "401 Unauthorized"),
        ("/status/418", ProbeFailure.UNEXPECTED_STATUS, "418 I'm a Teapot"),
        ("/bare", ProbeFailure.NO_FINGERPRINT, "no ETag or Content-Length"),
    ],
)
async def test_unhelpful_answers_are_indeterminate(
    model_host: ModelHost, session: aiohttp.ClientSession, path: str, failure: ProbeFailure, detail_end: str
) -> None:
    outcome = await probe_http_fingerprint(session, model_host.url(path), policy=loopback_allowed)
    assert (outcome.fingerprint, outcome.failure) == (None, failure)
    assert outcome.detail.endswith(detail_end)
    assert decide_drift("e", 1, outcome).kind is DriftKind.INDETERMINATE


async def test_a_slow_server_times_out(model_host: ModelHost, session: aiohttp.ClientSession) -> None:
    outcome = await probe_http_fingerprint(
        session, model_host.url("/slow"), client_timeout=SHORT, policy=loopback_allowed
    )
    assert outcome.failure is ProbeFailure.TIMEOUT
    assert outcome.detail.endswith("no answer within 0.2s")


async def test_nobody_listening(session: aiohttp.ClientSession) -> None:
    # Port 1 on loopback: connection refused, immediately.
    outcome = await probe_http_fingerprint(
        session, "http://127.0.0.1:1/m.gguf", client_timeout=SHORT, policy=loopback_allowed
    )
    assert outcome.failure is ProbeFailure.CONNECTION


@pytest.mark.parametrize(
    ("value", "parsed"), [(None, None), ("", None), ("12", 12), (" 7 ", 7), ("-1", None), ("x", None)]
)
def test_parse_content_length(value: str | None, parsed: int | None) -> None:
    assert parse_content_length(value) == parsed


async def test_local_probe_reports_the_size(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"x" * 300)
    outcome = await probe_local_fingerprint(str(model), (str(tmp_path),))
    assert outcome.fingerprint == Fingerprint(content_length=300)


@pytest.mark.parametrize(
    ("relative", "failure"),
    [
        ("absent", ProbeFailure.NOT_FOUND),
        ("file/below-a-file", ProbeFailure.NOT_FOUND),
        (".", ProbeFailure.IO_ERROR),  # a directory
        ("empty", ProbeFailure.NO_FINGERPRINT),
    ],
)
def test_local_probe_failures(tmp_path: Path, relative: str, failure: ProbeFailure) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "empty").write_bytes(b"")
    outcome = probe_local_fingerprint_sync(str(tmp_path / relative), (str(tmp_path),))
    assert (outcome.fingerprint, outcome.failure) == (None, failure)
