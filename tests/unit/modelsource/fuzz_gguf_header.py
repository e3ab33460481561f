"""atheris harness of the GGUF header reader (test_gguf_header_fuzz.py runs it briefly):

    python tests/unit/modelsource/fuzz_gguf_header.py CORPUS_DIR -runs=100000

An input is a crash when reading it raises anything but HeaderError, or gives metadata with a
value the API server would refuse."""

import os
import sys
import tempfile

import atheris

# Imported before the instrumented block, so that only the reader itself is instrumented.
from llmkube.plan.model import gguf_metadata_from_fields
from llmkube.plan.model.bounds import INT64_MAX, MAX_GGUF_TEXT

with atheris.instrument_imports(include=["llmkube.sources.ggufheader"]):
    from llmkube.sources.ggufheader import HeaderError, read_gguf_fields

SCRATCH = os.environ.get("FUZZ_SCRATCH") or os.path.join(tempfile.gettempdir(), "fuzz-gguf-header.gguf")


def one_input(data: bytes) -> None:
    with open(SCRATCH, "wb") as file:
        file.write(data)
    try:
        _, fields = read_gguf_fields(SCRATCH)
    except HeaderError:
        return
    for value in gguf_metadata_from_fields(fields).model_dump().values():
        if isinstance(value, int) and not 0 <= value <= INT64_MAX:
            raise AssertionError(f"{value} is beyond an int64")
        if isinstance(value, str) and len(value) > MAX_GGUF_TEXT + 40:
            raise AssertionError(f"a string of {len(value)} characters")


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
