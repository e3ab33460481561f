"""`pip install .` gives commands that work outside a checkout: a wheel built from this tree, installed
in a fresh virtual environment, run from a directory that is not the checkout."""

import os
import signal
import subprocess
import sys
import sysconfig
import time
import venv
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmkube.testing.rest import KubeRest, wait_until

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(ROOT)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("llmkube-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_env(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel installed. Its dependencies come from this test
    run's environment through a path entry, placed after the environment's own site-packages: the
    question here is what the wheel itself carries, not how PyPI resolves."""
    env = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True,
        timeout=300,
    )
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env


def test_the_wheel_carries_what_the_commands_read(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "llmkube/_bundled/manifests/manager/namespace.yaml",
        "llmkube/_bundled/manifests/rbac/cluster_role.yaml",
        "llmkube/_bundled/manifests/rbac/priorityclass-writer/cluster_role.yaml",
        "llmkube/_bundled/manifests/samples/cpu-llamacpp.yaml",
        "llmkube/_bundled/hack/build-k8s.sh",
        "llmkube/api/contract/inferenceservice.schema.json",
    ):
        assert needed in names, needed


def test_the_installed_package_reads_its_bundle_not_a_checkout(fresh_env: Path, tmp_path: Path) -> None:
    code = (
        "import llmkube, llmkube.bundled as b; "
        "print(llmkube.__file__); print(b.source_root()); "
        "print(len(b.manifest_documents('manager/namespace.yaml', 'rbac', 'rbac/priorityclass-writer')))"
    )
    out = subprocess.run(
        [str(fresh_env / "bin" / "python"), "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
    ).stdout.split()
    package, root, count = out
    assert package.startswith(str(fresh_env)), "the test must exercise the installed wheel"
    assert root.endswith("llmkube/_bundled")
    # the namespace; ServiceAccount, ClusterRole + binding, leader Role + binding, own-namespace Role +
    # binding, 2 user roles; the writer
    assert int(count) == 1 + 9 + 2


@pytest.fixture
def cluster_command(fresh_env: Path, tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [str(fresh_env / "bin" / "llmkube"), "cluster", "--tier", "api", "--sample"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # PYTHONFAULTHANDLER: a process that does not stop can be asked where it is (SIGABRT).
        env={**{k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, "PYTHONFAULTHANDLER": "1"},
        start_new_session=True,
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=60)


def test_llmkube_cluster_runs_from_the_installed_wheel(cluster_command: subprocess.Popen[str]) -> None:
    """The command that failed with FileNotFoundError outside a checkout: it installs the CRDs, the
    namespace, the RBAC and the sample from the wheel's bundle."""
    assert cluster_command.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any("export KUBECONFIG=" in line for line in lines):
        line = cluster_command.stdout.readline()
        if not line and cluster_command.poll() is not None:
            break
        lines.append(line)
    output = "".join(lines)
    assert "export KUBECONFIG=" in output, output
    kubeconfig = output.split("export KUBECONFIG=", 1)[1].split()[0]
    admin = KubeRest.from_kubeconfig(kubeconfig)
    assert admin.get("rbac.authorization.k8s.io/v1", "ClusterRole", "llmkube-controller")
    assert admin.get("rbac.authorization.k8s.io/v1", "ClusterRole", "llmkube-priorityclass-writer")
    sample = wait_until(
        lambda: admin.get_or_none(
            "inference.llmkube.dev/v1alpha1", "InferenceService", "tinyllama", "default"
        ),
        timeout=30,
        what="the sample InferenceService",
    )
    assert sample["spec"]["modelRef"] == "tinyllama"
    # The local cluster leaves the PriorityClasses to its controller: none applied by the installer.
    assert (
        admin.list(
            "scheduling.k8s.io/v1", "PriorityClass", label_selector="app.kubernetes.io/managed-by=llmkube"
        )
        == []
    )
    os.killpg(cluster_command.pid, signal.SIGINT)
    try:
        code = cluster_command.wait(timeout=60)
    except subprocess.TimeoutExpired:
        status = Path(f"/proc/{cluster_command.pid}/status").read_text()
        os.kill(cluster_command.pid, signal.SIGABRT)  # faulthandler writes every thread's stack
        rest = cluster_command.communicate(timeout=30)[0]
        pytest.fail(f"llmkube cluster did not stop on SIGINT:\n{status}\n{rest}")
    assert code == 0
