"""atheris harness of the router's HTTP parser (test_router_http_fuzz.py runs it briefly):

    python tests/unit/router/fuzz_http_server.py CORPUS_DIR -runs=100000

An input is a request stream and where it is split (its first byte: how many pieces); a crash is
anything the server raises or an invariant of tests/unit/router/server_fuzzing.py broken."""

import sys

import atheris

with atheris.instrument_imports(include=["llmkube.router.http"]):
    from tests.unit.router.server_fuzzing import run, split


def one_input(data: bytes) -> None:
    if not data:
        return
    step = max(1, data[0])
    body = data[1:]
    run(split(body, range(step, len(body), step)))


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
