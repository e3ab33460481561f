"""The user commands take the flags a kubectl user types: the connection flags before the verb,
`-o name` and `-o jsonpath=`, `-l`, `--no-headers`, `-A`, `-w` on list and status, and shell
completion (bash, zsh, fish) that completes commands, flags and the cluster's service names.
Separate processes against the full local control plane and the controller."""

import asyncio
import contextlib
import functools
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from e2e_support import API, RunningController, delete_services_and_wait, eventually, patch_isvc, phase_is
from llmkube_testing.pytest_plugin import ClusterHandle
from usercli_support import llmkube, plain, row_of

SOURCE = "https://models.invalid/habit-Q4_K_M.gguf"
LLMKUBE = Path(sys.executable).parent / "llmkube"


@pytest.fixture(autouse=True)
async def services_gone_before_the_namespace(
    operator: RunningController, full_namespace: str
) -> AsyncIterator[None]:
    yield
    await delete_services_and_wait(operator, full_namespace, pods_too=True)


async def deploy(cluster: ClusterHandle, namespace: str, name: str) -> None:
    run = await llmkube(cluster.kubeconfig, "deploy", SOURCE, "--name", name, "-n", namespace, "--no-wait")
    assert run.code == 0, run.text
    await eventually(
        phase_is(cluster.admin(), "InferenceService", name, namespace, "Ready"), what=f"{name} Ready"
    )


async def test_flags_before_the_verb_names_jsonpath_selectors_and_headers(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns, admin = full_cluster.kubeconfig, full_namespace, full_cluster.admin()
    for name in ("alpha", "beta"):
        await deploy(full_cluster, ns, name)
    admin.request(
        "PATCH",
        admin.path_for(API, "InferenceService", ns, "beta"),
        {"metadata": {"labels": {"team": "search"}}},
        content_type="application/merge-patch+json",
    )

    before = await llmkube(kc, "-n", ns, "list")
    after = await llmkube(kc, "list", "-n", ns)
    assert before.code == after.code == 0, before.text + after.text
    assert row_of(before.out, "alpha")["PHASE"] == row_of(after.out, "alpha")["PHASE"] == "Ready"
    with_kubeconfig = await llmkube(
        Path("/nonexistent"), "--kubeconfig", str(kc), "-n", ns, "status", "alpha"
    )
    assert with_kubeconfig.code == 0 and f"InferenceService {ns}/alpha" in with_kubeconfig.out

    names = await llmkube(kc, "-n", ns, "list", "-o", "name")
    assert names.out.splitlines() == [
        "inferenceservice.inference.llmkube.dev/alpha",
        "inferenceservice.inference.llmkube.dev/beta",
    ]
    models = await llmkube(kc, "-n", ns, "list", "models", "-o", "name")
    assert models.out.splitlines() == [
        "model.inference.llmkube.dev/alpha",
        "model.inference.llmkube.dev/beta",
    ]
    one = await llmkube(kc, "-n", ns, "status", "beta", "-o", "name")
    assert one.out == "inferenceservice.inference.llmkube.dev/beta\n"

    template = '{range .items[*]}{.metadata.name}={.status.phase}{"\\n"}{end}'
    listed = await llmkube(kc, "-n", ns, "list", "-o", f"jsonpath={template}")
    assert listed.out == "alpha=Ready\nbeta=Ready\n", listed.text
    endpoint = await llmkube(kc, "-n", ns, "status", "alpha", "-o", "jsonpath={.status.endpoint}")
    assert endpoint.out == f"http://alpha.{ns}.svc.cluster.local:8080/v1/chat/completions"
    ready = await llmkube(
        kc, "-n", ns, "status", "alpha", "-o", 'jsonpath={.status.conditions[?(@.type=="Available")].status}'
    )
    assert ready.out == "True"
    bad = await llmkube(kc, "-n", ns, "list", "-o", "jsonpath={.items[0}")
    assert bad.code == 2 and "jsonpath: unclosed [" in bad.err

    selected = await llmkube(kc, "-n", ns, "list", "-l", "team=search", "-o", "name")
    assert selected.out == "inferenceservice.inference.llmkube.dev/beta\n"
    none = await llmkube(kc, "-n", ns, "list", "-l", "team=nobody")
    assert (none.code, none.out) == (0, "")
    assert none.err.strip() == f'No InferenceServices found matching team=nobody in namespace "{ns}".'

    bare = await llmkube(kc, "-n", ns, "list", "--no-headers")
    lines = [line.split() for line in plain(bare.out).splitlines()]
    assert [line[0] for line in lines] == ["alpha", "beta"], bare.out
    everywhere = await llmkube(kc, "list", "-A")
    assert row_of(everywhere.out, "alpha")["NAMESPACE"] == ns
    assert (await llmkube(kc, "queue", "-A", "--no-headers")).code == 0


async def read_until(stream: asyncio.StreamReader, text: str, *, within: float = 60, seen: str = "") -> str:
    """What `stream` printed, from `seen` (read before) until `text` appears in it."""
    async with asyncio.timeout(within):
        while text not in seen:
            chunk = await stream.read(4096)
            if not chunk:
                raise AssertionError(f"the stream ended before {text!r}:\n{seen}")
            seen += chunk.decode()
    return seen


@contextlib.asynccontextmanager
async def running(kubeconfig: Path, *args: str) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "llmkube.cli", *args, stdout=asyncio.subprocess.PIPE, env=env
    )
    try:
        yield process
    finally:
        process.terminate()
        await process.wait()


async def test_list_and_status_watch(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns, admin = full_cluster.kubeconfig, full_namespace, full_cluster.admin()
    await deploy(full_cluster, ns, "first")
    async with running(kc, "-n", ns, "list", "-w") as watching:
        assert watching.stdout is not None
        start = await read_until(watching.stdout, "first")
        assert "NAME" in start.splitlines()[0]
        await deploy(full_cluster, ns, "second")
        seen = await read_until(watching.stdout, "second")
        # One row per change, without the header again.
        assert plain(start + seen).count("NAME ") == 1, start + seen

    async with running(kc, "-n", ns, "status", "first", "-w") as watching:
        assert watching.stdout is not None
        await read_until(watching.stdout, "Recent events")
        patch_isvc(admin, "first", ns, {"replicas": 2})
        marked = await read_until(watching.stdout, "UTC ---")
        # The status again, in full, after the marker (the chunk may have ended at the marker).
        shown_again = await read_until(watching.stdout, "Recent events", seen=marked.partition("UTC ---")[2])
        assert f"InferenceService {ns}/first" in shown_again, shown_again
        await read_until(watching.stdout, "2/2 ready", within=90, seen=shown_again)

    async with running(kc, "-n", ns, "list", "-w", "-o", "name") as watching:
        assert watching.stdout is not None
        await read_until(watching.stdout, "inferenceservice.inference.llmkube.dev/first")
        await deploy(full_cluster, ns, "third")
        await read_until(watching.stdout, "inferenceservice.inference.llmkube.dev/third")


def complete_in_bash(kubeconfig: Path, line: str) -> list[str]:
    """What bash offers for the last word of `line`, through the script `llmkube completion bash`."""
    words = line.split(" ")
    script = (
        f"source <({LLMKUBE} completion bash)\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        "_llmkube; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PATH": f"{LLMKUBE.parent}:{os.environ['PATH']}"}
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    return [word for word in result.stdout.splitlines() if word]


async def test_shell_completion(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    kc, ns = full_cluster.kubeconfig, full_namespace
    await deploy(full_cluster, ns, "completed-one")
    loop = asyncio.get_running_loop()

    async def bash(line: str) -> list[str]:
        return await loop.run_in_executor(None, complete_in_bash, kc, line)

    assert await bash("llmkube sta") == ["status"]
    assert set(await bash("llmkube ")) >= {"deploy", "list", "status", "logs", "completion", "queue"}
    assert await bash(f"llmkube status -n {ns} comp") == ["completed-one"]
    assert await bash(f"llmkube -n {ns} logs ") == ["completed-one"]
    assert sorted(await bash("llmkube list mo")) == ["model", "models"]
    assert "--no-headers" in await bash("llmkube list --no")
    assert await bash("llmkube deploy x --runtime v") == ["vllm"]
    assert await bash("llmkube completion f") == ["fish"]
    # The cluster's namespaces after -n, the kubeconfig's contexts after --context.
    assert await bash(f"llmkube list -n {ns}") == [ns]
    assert "default" in await bash("llmkube status --namespace ")
    current = yaml.safe_load(await loop.run_in_executor(None, Path(kc).read_text))["current-context"]
    assert await bash(f"llmkube list --context {current[:3]}") == [current]

    zsh, fish = shutil.which("zsh"), shutil.which("fish")
    env = {**os.environ, "KUBECONFIG": str(kc), "PATH": f"{LLMKUBE.parent}:{os.environ['PATH']}"}

    async def shell(*argv: str) -> subprocess.CompletedProcess[str]:
        run = functools.partial(subprocess.run, capture_output=True, text=True, env=env, timeout=60)
        return await loop.run_in_executor(None, run, list(argv))

    if zsh:
        loaded = await shell(zsh, "-c", f"source <({LLMKUBE} completion zsh) && whence -w _llmkube")
        assert loaded.returncode == 0 and "_llmkube: function" in loaded.stdout, loaded.stderr
    if fish:
        source = f"{LLMKUBE} completion fish | source"
        offered = await shell(fish, "-c", f"{source}; complete -C 'llmkube status -n {ns} comp'")
        assert offered.returncode == 0, offered.stderr
        assert [line.split("\t")[0] for line in offered.stdout.splitlines()] == ["completed-one"]
        commands = await shell(fish, "-c", f"{source}; complete -C 'llmkube sta'")
        assert [line.split("\t")[0] for line in commands.stdout.splitlines()] == ["status"], commands
