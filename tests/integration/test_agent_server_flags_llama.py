"""The host agent's view of llama-server's flags, held to the pinned llama-server itself (the node
tier's build, run as a process on loopback):

* the committed table (plan/agent/llama_server_flags.py) is what the binary's --help says, so a new
  llama.cpp cannot add a flag, or change how many values one takes, without this test failing;
* every flag the agent lets through parses as the agent judged it (a value it took for a value is
  one to llama.cpp too);
* what the allowlist is for is real: a server given `--path /` serves the host's files;
* a server started with the agent's `--api-key-file` answers nothing but /health without its key.
"""

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from llama_host import LlamaServer, _free_port, llama_server_binary
from llmkube_testing.tiny_gguf import write_tiny_gguf

from llmkube.plan.agent import llama_server_flags
from llmkube.plan.agent.help_table import parse_help
from llmkube.plan.agent.server_flags import ALLOWED, ALLOWED_NEGATIONS, Value, judge

pytestmark = pytest.mark.node_prereqs  # llama-server, from the node tier's image (make node-prereqs)

SAMPLE = {Value.INT: "2", Value.FLOAT: "0.5", Value.WORD: "auto", Value.TEXT: "hello"}
# A word some flags need that "auto" is not
WORDS = {
    "--reasoning-format": "deepseek",
    "--pooling": "mean",
    "--rope-scaling": "linear",
    "--samplers": "top_k;top_p",
    "--sampler-seq": "kp",
    "--logit-bias": "15043+1",
    "--reasoning-effort": "low",
    "--dry-sequence-breaker": "none",
}
TEXTS = {"--chat-template": "chatml", "--chat-template-kwargs": '{"a": 1}', "--json-schema": "{}"}


@pytest.fixture(scope="module")
def binary() -> Path:
    return llama_server_binary()


def test_the_committed_table_is_the_pinned_servers(binary: Path) -> None:
    help_text = subprocess.run(
        [str(binary), "--help"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    found = parse_help(help_text)
    assert {flag.canonical: flag.values for flag in found} == llama_server_flags.FLAGS, (
        "llama-server's flags changed: run hack/gen-llama-server-flags.py and review server_flags.py"
    )
    for flag in found:
        for spelling in flag.spellings:
            assert llama_server_flags.canonical(spelling) == flag.canonical


def allowed_args() -> list[str]:
    args: list[str] = []
    for flag, kind in ALLOWED.items():
        if flag in ("--embedding", "--rerank"):  # one mode at a time
            continue
        args.append(flag)
        if kind is not Value.NONE:
            args.append(WORDS.get(flag) or TEXTS.get(flag) or SAMPLE[kind])
    return [*args, *sorted(ALLOWED_NEGATIONS)]


def test_every_flag_the_agent_passes_parses_as_it_judged(binary: Path) -> None:
    """llama.cpp runs each flag's handler in order and `--version` exits in its own: a run that
    prints the version parsed everything before it, each value where the agent's table put it."""
    args = allowed_args()
    assert judge(args) is None
    done = subprocess.run(
        [str(binary), *args, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "version:" in done.stdout + done.stderr


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_gguf(tmp_path_factory.mktemp("flags") / "tiny.gguf")


@contextmanager
def serve(binary: Path, model: Path, log: Path, *extra: str) -> Iterator[LlamaServer]:
    port = _free_port()
    command = [str(binary), "--model", str(model), "--host", "127.0.0.1", "--port", str(port), *extra]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    server = LlamaServer(f"http://127.0.0.1:{port}", process, log)
    try:
        for _ in range(300):
            assert process.poll() is None, log.read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"{server.url}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.2)
        yield server
    finally:
        process.kill()
        process.wait()


def status_of(url: str, key: str | None = None, body: dict[str, object] | None = None) -> tuple[int, bytes]:
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_the_flag_the_allowlist_refuses_first_serves_the_hosts_files(
    binary: Path, model: Path, tmp_path: Path
) -> None:
    """Why `--path` is refused: what a tenant got before the allowlist, on the real server."""
    secret = tmp_path / "host-secret.txt"
    secret.write_text("only the host may read this\n")
    refused = judge(["--path", str(tmp_path)])
    assert refused is not None and "serves the host's files" in refused.why
    with serve(binary, model, tmp_path / "path.log", "--path", str(tmp_path)) as server:
        code, body = status_of(f"{server.url}/host-secret.txt")
        assert (code, body) == (200, b"only the host may read this\n")


def test_a_keyed_server_answers_only_health_without_its_key(
    binary: Path, model: Path, tmp_path: Path
) -> None:
    key_file = tmp_path / "demo.key"
    key_file.write_text("k" * 64 + "\n")
    key_file.chmod(0o600)
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    with serve(binary, model, tmp_path / "keyed.log", "--api-key-file", str(key_file), "--metrics") as server:
        assert status_of(f"{server.url}/health")[0] == 200
        assert status_of(f"{server.url}/v1/chat/completions", body=chat)[0] == 401
        assert status_of(f"{server.url}/v1/chat/completions", "wrong", body=chat)[0] == 401
        assert status_of(f"{server.url}/metrics")[0] == 401
        assert status_of(f"{server.url}/v1/chat/completions", "k" * 64, body=chat)[0] == 200
        assert status_of(f"{server.url}/metrics", "k" * 64)[0] == 200
        assert "k" * 64 not in Path(f"/proc/{server.process.pid}/cmdline").read_text()
