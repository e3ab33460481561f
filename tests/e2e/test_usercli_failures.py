"""Every way a user command fails ends in one line on stderr and a non-zero exit code, with no
traceback: no kubeconfig, an unknown context, a cluster that does not answer (refused, unknown
name, untrusted certificate), a name that does not exist, logs of a service whose pods have not
started, a value the controller would refuse, a spec the API server refuses. Run as separate
processes, as a person runs them, against the full local control plane."""

import base64
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from e2e_support import API, RunningController, delete_services_and_wait, eventually, model, phase_is
from llmkube_testing.pki import generate_pki
from llmkube_testing.pytest_plugin import ClusterHandle
from usercli_support import Run, llmkube

SOURCE = "https://models.invalid/tiny-chat-Q4_K_M.gguf"


@pytest.fixture(autouse=True)
async def services_gone_before_the_namespace(
    operator: RunningController, full_namespace: str
) -> AsyncIterator[None]:
    yield
    await delete_services_and_wait(operator, full_namespace, pods_too=True)


def one_error_line(run: Run, code: int = 1) -> str:
    """The run failed with `code`, said so in exactly one line on stderr, and printed no traceback."""
    assert run.code == code, run.text
    lines = run.err.splitlines()
    assert len(lines) == 1, run.err
    assert lines[0].startswith("error: "), run.err
    assert "Traceback" not in run.text
    return lines[0]


def kubeconfig_for(directory: Path, server: str, *, ca: str | None = None) -> Path:
    """A kubeconfig with one context for `server` (token auth: nothing needs to be read)."""
    cluster: dict[str, object] = {"server": server}
    if ca is not None:
        cluster["certificate-authority-data"] = ca
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path = directory / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_no_kubeconfig(tmp_path: Path) -> None:
    run = await llmkube(tmp_path / "nonexistent", "list")
    line = one_error_line(run)
    assert line == "error: kubeconfig: no kubeconfig found (none of the files in $KUBECONFIG exists)"


async def test_an_unknown_context(full_cluster: ClusterHandle) -> None:
    before = await llmkube(full_cluster.kubeconfig, "--context", "nope", "list")
    assert one_error_line(before) == "error: kubeconfig: context 'nope' is not in the kubeconfig"
    after = await llmkube(full_cluster.kubeconfig, "list", "--context", "nope")
    assert one_error_line(after) == one_error_line(before)


@pytest.mark.parametrize(
    ("server", "reason"),
    [
        ("https://127.0.0.1:{port}", "connection refused (is the API server running, is the port right?)"),
        ("https://no-such-host.invalid:6443", "the server's name does not resolve"),
    ],
)
async def test_a_cluster_that_does_not_answer(tmp_path: Path, server: str, reason: str) -> None:
    url = server.format(port=closed_port())
    run = await llmkube(kubeconfig_for(tmp_path, url), "list", within=60)
    assert one_error_line(run) == f"error: cannot reach the cluster at {url}: {reason}"


async def test_a_server_whose_certificate_is_not_trusted(full_cluster: ClusterHandle, tmp_path: Path) -> None:
    """The real API server, with a CA that did not sign its certificate."""
    other = generate_pki(tmp_path / "other-pki")
    ca = base64.b64encode(other.ca_cert.read_bytes()).decode()
    run = await llmkube(kubeconfig_for(tmp_path, full_cluster.server, ca=ca), "list")
    line = one_error_line(run)
    assert line.startswith(
        f"error: cannot reach the cluster at {full_cluster.server}: its certificate is not trusted"
    )


async def test_deleting_what_does_not_exist(full_cluster: ClusterHandle, full_namespace: str) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    run = await llmkube(kc, "delete", "nope", "-n", ns)
    assert one_error_line(run) == f'error: no InferenceService or Model "nope" found in namespace "{ns}"'
    assert run.out == ""
    keep = await llmkube(kc, "delete", "nope", "--keep-model", "-n", ns)
    assert one_error_line(keep) == f'error: InferenceService "nope" not found in namespace "{ns}"'


async def test_status_and_logs_of_what_does_not_exist(
    full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    for verb in ("status", "logs"):
        run = await llmkube(kc, verb, "nope", "-n", ns)
        assert one_error_line(run) == f'error: InferenceService "nope" in namespace "{ns}" not found'


async def test_logs_of_a_service_whose_pod_is_not_on_a_node(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    """The API server answers a log request for an unscheduled pod with an empty 200: the command
    used to print nothing and exit 0."""
    kc, ns, admin = full_cluster.kubeconfig, full_namespace, full_cluster.admin()
    admin.apply(model("stuck", SOURCE), namespace=ns)
    service = {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": "stuck", "namespace": ns},
        "spec": {"modelRef": "stuck", "nodeSelector": {"llmkube.test/no-such-node": "x"}},
    }
    admin.apply(service, namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "stuck", ns, "Creating"), what="stuck Creating")

    def unscheduled() -> bool:
        pods = admin.list("v1", "Pod", ns, label_selector="inference.llmkube.dev/service=stuck")
        conditions = [c for p in pods for c in (p.get("status") or {}).get("conditions") or []]
        return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)

    await eventually(unscheduled, what="the scheduler to give up on its pod")
    run = await llmkube(kc, "logs", "stuck", "-n", ns)
    line = one_error_line(run)
    assert line.startswith('error: pod "stuck-') and "is not on a node yet (Pending: 0/" in line, line
    assert line.endswith("see llmkube status stuck"), line
    assert run.out == ""


async def test_logs_of_a_service_without_pods(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns, admin = full_cluster.kubeconfig, full_namespace, full_cluster.admin()
    # No Model: the service is Failed (ModelNotFound) and has no Deployment.
    service = {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": "lonely"}}
    admin.apply({**service, "spec": {"modelRef": "missing"}}, namespace=ns)
    await eventually(phase_is(admin, "InferenceService", "lonely", ns, "Failed"), what="lonely Failed")
    run = await llmkube(kc, "logs", "lonely", "-n", ns)
    assert one_error_line(run) == 'error: "lonely" has no pods (yet): see llmkube status lonely'


async def test_deploy_refuses_a_value_the_controller_would_refuse(
    full_cluster: ClusterHandle, full_namespace: str
) -> None:
    """`--cpu two` used to be applied and exit 0 with --no-wait (the service then Failed, later)."""
    kc, ns, admin = full_cluster.kubeconfig, full_namespace, full_cluster.admin()
    for extra in ([], ["--no-wait"], ["--dry-run"], ["--dry-run=server"]):
        run = await llmkube(kc, "deploy", SOURCE, "-n", ns, "--cpu", "two", *extra)
        line = one_error_line(run)
        assert line == 'error: --cpu: invalid quantity "two" (for example 500m, 2, 4Gi)', extra
    assert admin.get_or_none(API, "Model", "tiny-chat", ns) is None
    assert admin.get_or_none(API, "InferenceService", "tiny-chat", ns) is None


async def test_deploy_asks_the_api_server_before_writing_anything(
    full_cluster: ClusterHandle, full_namespace: str
) -> None:
    """A spec the API server refuses (here its schema: replicas must not be negative) is refused by
    a dry run of both objects first: the Model is not left behind."""
    kc, ns, admin = full_cluster.kubeconfig, full_namespace, full_cluster.admin()
    run = await llmkube(kc, "deploy", SOURCE, "-n", ns, "--replicas", "-1", "--no-wait")
    line = one_error_line(run)
    assert line.startswith('error: creating InferenceService "tiny-chat": '), line
    assert "spec.replicas" in line, line
    assert admin.get_or_none(API, "Model", "tiny-chat", ns) is None
