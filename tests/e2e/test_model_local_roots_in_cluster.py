"""A Model cannot make the controller read files outside --model-local-roots.

The session's controller may read local models only under the tests' temporary directory. Files
elsewhere (a stand-in for the service-account token, another tenant's weights), `..` paths, links
out of the roots and the real token path are all `Failed/InvalidSource` with a message naming the
rule, and nothing is copied, hashed or described; a Ready Model edited to such a source fails the
same way, and recovers when edited back."""

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_support import (
    MERGE,
    RunningController,
    condition_triple,
    eventually,
    model,
    patch,
    phase_is,
    reconcile_log,
    settled,
)

from llmkube.kube.types import ObjectKey
from llmkube.plan.model.source import cache_key

# Their Models come from local files: the test namespaces allow them, as an admin would.
pytestmark = pytest.mark.local_sources

API = "inference.llmkube.dev/v1alpha1"


@pytest.fixture
def outside() -> Iterator[Path]:
    """A directory outside the roots, holding what must never be read."""
    directory = Path(tempfile.mkdtemp(prefix="llmkube-not-a-root-"))
    secrets = directory / "var" / "run" / "secrets" / "kubernetes.io" / "serviceaccount"
    secrets.mkdir(parents=True)
    (secrets / "token").write_text("eyJhbGciOiJSUzI1NiJ9.not-for-models")
    (directory / "other-tenant.gguf").write_bytes(b"GGUF weights of somebody else")
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def roots(operator: RunningController) -> tuple[str, ...]:
    return operator.controllers.models.config.local_source_roots


async def test_sources_outside_the_roots_fail_and_nothing_is_read(
    operator: RunningController, full_namespace: str, tmp_path: Path, outside: Path
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    (allowed,) = roots(operator)
    assert not outside.is_relative_to(allowed)
    link_to_token = tmp_path / "innocent.gguf"
    link_to_token.symlink_to(
        outside / "var" / "run" / "secrets" / "kubernetes.io" / "serviceaccount" / "token"
    )
    link_to_dir = tmp_path / "shared"
    link_to_dir.symlink_to(outside)
    token = outside / "var" / "run" / "secrets" / "kubernetes.io" / "serviceaccount" / "token"
    lexical = {
        "token": f"file://{token}",
        "sa-token": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "dotdot": f"{tmp_path}/../../../{outside.relative_to('/')}/other-tenant.gguf",
    }
    through_links = {
        "file-link": f"file://{link_to_token}",
        "dir-link": str(link_to_dir / "other-tenant.gguf"),
    }
    reconciles = reconcile_log(operator.controllers.models.controller)
    for name, source in {**lexical, **through_links}.items():
        admin.create(model(name, source=source), namespace=ns)

    for name, source in {**lexical, **through_links}.items():
        status = await eventually(phase_is(admin, "Model", name, ns, "Failed"), what=f"{name} Failed")
        degraded = condition_triple(status, "Degraded")
        assert degraded is not None and degraded[:2] == ("True", "InvalidSource"), (name, degraded)
        assert f"--model-local-roots: {allowed}" in degraded[2], degraded[2]
        assert "is not allowed" in degraded[2]
        for described in ("path", "sha256", "gguf", "sourceContentLength"):
            assert described not in status, (name, described)
        assert not (operator.model_cache / cache_key(source)).exists() or not any(
            (operator.model_cache / cache_key(source)).iterdir()
        ), f"{name}: something was copied"
    for name in through_links:
        message = condition_triple(await eventually(phase_is(admin, "Model", name, ns, "Failed")), "Degraded")
        assert message is not None and "through a symbolic link" in message[2]

    # No hot loop: the lexical refusals are final (no requeue), the link ones retried every 5 min.
    models = operator.controllers.models.controller
    await settled(models)
    counts = {name: reconciles(ObjectKey(ns, name)) for name in {**lexical, **through_links}}
    await asyncio.sleep(3)  # a window in which a hot loop would show
    await settled(models)
    assert {name: reconciles(ObjectKey(ns, name)) for name in counts} == counts


async def test_a_ready_model_edited_to_a_source_outside_fails_and_recovers(
    operator: RunningController, full_namespace: str, tmp_path: Path, outside: Path
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    weights = tmp_path / "weights.gguf"
    weights.write_bytes(b"GGUF" + bytes(60))
    admin.create(model("moving", source=str(weights)), namespace=ns)
    ready = await eventually(phase_is(admin, "Model", "moving", ns, "Ready"))
    assert ready["sha256"]

    escaped = tmp_path / "escaped.gguf"
    escaped.symlink_to(outside / "other-tenant.gguf")
    patch(admin, API, "Model", "moving", ns, {"spec": {"source": str(escaped)}}, content_type=MERGE)
    failed = await eventually(phase_is(admin, "Model", "moving", ns, "Failed"))
    degraded = condition_triple(failed, "Degraded")
    assert degraded is not None and degraded[1] == "InvalidSource"
    assert condition_triple(failed, "Available") is not None
    assert condition_triple(failed, "Available")[0] == "False"  # type: ignore[index]
    assert "sha256" not in failed and "path" not in failed  # nothing describes the refused file

    patch(admin, API, "Model", "moving", ns, {"spec": {"source": str(weights)}}, content_type=MERGE)
    again = await eventually(phase_is(admin, "Model", "moving", ns, "Ready"))
    assert again["sha256"] == ready["sha256"]
