"""A local cluster's temporary directory (up to 140 MB: etcd data, PKI, logs) is removed at a clean
stop, kept without its etcd data when the run failed, kept whole when asked; stderr names what is
kept. The same for `llmkube cluster`, with `--keep-logs`."""

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from llmkube_testing import cluster as cluster_module
from llmkube_testing.cluster import (
    KEEP_ENV,
    LocalCluster,
    MissingBinaryError,
    check_binaries,
    default_bin_dir,
)

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def no_outside_say(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Neither the environment nor an earlier failed test of this session decides here."""
    try:
        check_binaries(default_bin_dir(), "api")
    except MissingBinaryError as missing:
        pytest.fail(str(missing), pytrace=False)
    monkeypatch.delenv(KEEP_ENV, raising=False)
    monkeypatch.setattr(cluster_module, "run_failure", None)
    yield


def test_a_clean_stop_removes_the_directory(capfd: pytest.CaptureFixture[str]) -> None:
    with LocalCluster("api") as cluster:
        assert (cluster.workdir / "etcd").is_dir() and any(cluster.logs_dir.iterdir())
    assert not cluster.workdir.exists()
    assert "kept" not in capfd.readouterr().err


def test_a_failed_run_keeps_the_logs_without_the_etcd_data_and_says_where(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(RuntimeError, match="the test broke"), LocalCluster("api") as cluster:
        raise RuntimeError("the test broke")
    try:
        assert not (cluster.workdir / "etcd").exists()
        assert (cluster.logs_dir / "kube-apiserver.log").read_text()
        err = capfd.readouterr().err
        assert f"llmkube: kept {cluster.workdir} (RuntimeError: the test broke)" in err, err
        assert f"component logs in {cluster.logs_dir}" in err
    finally:
        subprocess.run(["rm", "-rf", str(cluster.workdir)], check=True)


def test_a_failure_reported_by_the_run_keeps_the_logs(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """What the pytest plugin installs: a stop after a failed test keeps the directory."""
    monkeypatch.setattr(cluster_module, "run_failure", lambda: "1 test failed in this session")
    with LocalCluster("api") as cluster:
        pass
    try:
        assert cluster.logs_dir.is_dir() and not (cluster.workdir / "etcd").exists()
        assert "(1 test failed in this session)" in capfd.readouterr().err
    finally:
        subprocess.run(["rm", "-rf", str(cluster.workdir)], check=True)


def test_asked_to_keep_it_keeps_all_of_it(capfd: pytest.CaptureFixture[str]) -> None:
    with LocalCluster("api", keep_workdir=True) as cluster:
        pass
    try:
        assert (cluster.workdir / "etcd").is_dir() and (cluster.logs_dir / "etcd.log").exists()
        assert f"llmkube: kept {cluster.workdir} (kept as asked" in capfd.readouterr().err
    finally:
        subprocess.run(["rm", "-rf", str(cluster.workdir)], check=True)


@pytest.mark.parametrize("keep", [False, True], ids=["clean-stop", "keep-logs"])
def test_llmkube_cluster_removes_its_directory_at_ctrl_c_unless_told_to_keep_it(
    keep: bool, tmp_path: Path
) -> None:
    command = [
        sys.executable,
        "-c",
        "from llmkube.cli import main; raise SystemExit(main())",
        "cluster",
        "--tier",
        "api",
    ]
    process = subprocess.Popen(
        command + (["--keep-logs"] if keep else []),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", KEEP_ENV)},
        start_new_session=True,
    )
    assert process.stdout is not None
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(line.startswith("logs: ") for line in lines):
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                break
            lines.append(line)
        found = re.search(r"^logs: (\S+) ", "".join(lines), re.MULTILINE)
        assert found is not None, "".join(lines)
        logs = Path(found.group(1))
        assert logs.is_dir()
        os.killpg(process.pid, signal.SIGINT)
        rest = process.communicate(timeout=60)[0]
        assert process.returncode == 0, rest
        if keep:
            assert (logs.parent / "etcd").is_dir() and (logs / "kube-apiserver.log").exists()
            assert f"llmkube: kept {logs.parent} (kept as asked" in rest, rest
            subprocess.run(["rm", "-rf", str(logs.parent)], check=True)
        else:
            assert not logs.parent.exists(), rest
            assert "kept" not in rest
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
