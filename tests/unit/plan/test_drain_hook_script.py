"""The drain's preStop hook, run by a real `sh` against a real HTTP server on loopback serving each
runtime's metrics page: what it sums, when it ends, what it says when it cannot tell or gives up."""

import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from llmkube.plan.inferenceservice.drain import DrainHook

if shutil.which("curl") is None and shutil.which("wget") is None:  # pragma: no cover
    pytest.skip("the hook reads the page with curl or wget: neither is installed", allow_module_level=True)

LLAMACPP = ("llamacpp:requests_processing", "llamacpp:requests_deferred")
VLLM = ("vllm:num_requests_running", "vllm:num_requests_waiting")


@contextmanager
def metrics_page(pages: list[str]) -> Iterator[int]:
    """Serves /metrics: each answer the next page of `pages` (the last one again once all are read)."""
    served = iter(pages)
    last = [pages[0]]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            last[0] = next(served, last[0])
            body = last[0].encode()
            self.send_response(200 if self.path == "/metrics" else 404)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def run_hook(port: int, timeout: int, metrics: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    command = DrainHook(timeout=timeout, settle=0, port=port, metrics=metrics).lifecycle()["preStop"]["exec"]
    return subprocess.run(command["command"], capture_output=True, text=True, timeout=60, check=False)


LLAMA_PAGE = """# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {processing}
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred {deferred}
# HELP llamacpp:requests_processing_total not ours
llamacpp:requests_processing_total 99
"""
VLLM_PAGE = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="m {{x}}"}} {running}
vllm:num_requests_running{{engine="1",model_name="m"}} {running}
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting} 1767225600000
"""


@pytest.mark.parametrize(
    ("page", "metrics", "held"),
    [
        (LLAMA_PAGE.format(processing=2, deferred=3), LLAMACPP, 5),
        (LLAMA_PAGE.format(processing=1, deferred=0), LLAMACPP, 1),
        # every label set is summed; a timestamp after the value is not read as one
        (VLLM_PAGE.format(running="1.0", waiting="2.0"), VLLM, 4),
    ],
)
def test_a_busy_server_holds_the_pod_until_the_timeout(
    page: str, metrics: tuple[str, ...], held: int
) -> None:
    with metrics_page([page]) as port:
        done = run_hook(port, 1, metrics)
    assert done.returncode == 1
    assert done.stdout.strip() == (
        f"llmkube drain: timeout (1 s) reached with {held} requests in flight: the server stops now"
    )


@pytest.mark.parametrize(
    ("pages", "metrics"),
    [
        ([LLAMA_PAGE.format(processing=0, deferred=0)], LLAMACPP),
        ([VLLM_PAGE.format(running="0.0", waiting="0.0")], VLLM),
        # busy, then done: it waits for the end
        (
            [LLAMA_PAGE.format(processing=p, deferred=d) for p, d in ((1, 1), (1, 0), (0, 0))],
            LLAMACPP,
        ),
    ],
)
def test_an_idle_server_lets_the_pod_go(pages: list[str], metrics: tuple[str, ...]) -> None:
    with metrics_page(pages) as port:
        done = run_hook(port, 30, metrics)
    assert (done.returncode, done.stdout) == (0, "")


def test_idle_once_then_busy_again_is_not_idle() -> None:
    """One idle reading is not enough: a request that arrives just after it is still waited for."""
    idle, busy = LLAMA_PAGE.format(processing=0, deferred=0), LLAMA_PAGE.format(processing=1, deferred=0)
    with metrics_page([idle, busy]) as port:
        done = run_hook(port, 2, LLAMACPP)
    assert done.returncode == 1 and "with 1 requests in flight" in done.stdout


@pytest.mark.parametrize(
    "pages",
    [
        ["# the page lacks the gauges\nother_metric 1\n"],
        [LLAMA_PAGE.format(processing=0, deferred=0)],  # read with another runtime's names
    ],
)
def test_a_page_without_the_gauges_cannot_tell(pages: list[str]) -> None:
    with metrics_page(pages) as port:
        done = run_hook(port, 30, VLLM)
    assert done.returncode == 1
    assert done.stdout.strip() == (
        f"llmkube drain: cannot read the requests in flight from http://127.0.0.1:{port}/metrics: "
        "the server stops now"
    )


def test_no_server_cannot_tell() -> None:
    with metrics_page(["x 1\n"]) as port:
        pass  # closed: nothing listens on the port any more
    done = run_hook(port, 30, LLAMACPP)
    assert done.returncode == 1 and "cannot read the requests in flight" in done.stdout
