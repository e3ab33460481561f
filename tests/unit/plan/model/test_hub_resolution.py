"""Which Models the controller gives files from the Hub's list (a GGUF repository named with a
quantization and no files), and when a status's choice describes the Model's spec (pure)."""

from typing import Any

import pytest

from llmkube.api.model import Model
from llmkube.plan.model.hub_resolution import resolved_files, wants_resolution, with_resolved_files
from llmkube.plan.model.source import cache_key

SOURCE = "hf://org/Tiny-GGUF"


def model(spec: dict[str, Any], status: dict[str, Any] | None = None, generation: int = 2) -> Model:
    return Model.model_validate(
        {
            "metadata": {"name": "m", "generation": generation},
            "spec": spec,
            **({"status": status} if status else {}),
        }
    )


@pytest.mark.parametrize(
    ("spec", "wanted"),
    [
        ({"source": SOURCE, "quantization": "Q4_K_M"}, True),
        ({"source": "org/Tiny-GGUF", "quantization": "Q4_K_M"}, True),  # a repository id too
        ({"source": SOURCE, "quantization": "Q4_K_M", "files": ["a.gguf"]}, False),  # files win
        ({"source": SOURCE}, False),  # no quantization: the runtime's, as before
        ({"source": SOURCE, "quantization": "awq", "format": "safetensors"}, False),
        ({"source": "https://host/m-Q4_K_M.gguf", "quantization": "Q4_K_M"}, False),  # one file already
        ({"source": SOURCE, "quantization": "Q4_K_M", "hardware": {"accelerator": "metal"}}, False),
    ],
)
def test_wants_resolution(spec: dict[str, Any], wanted: bool) -> None:
    assert wants_resolution(model(spec)) is wanted


SPEC = {"source": SOURCE, "quantization": "Q8_0", "mmproj": "mmproj-f16.gguf"}
CHOSEN = {"stagedFiles": ["q8-00001-of-00002.gguf", "q8-00002-of-00002.gguf", "mmproj-f16.gguf"]}


@pytest.mark.parametrize(
    ("status", "files"),
    [
        (
            {**CHOSEN, "observedGeneration": 2, "cacheKey": cache_key(SOURCE)},
            ("q8-00001-of-00002.gguf", "q8-00002-of-00002.gguf"),
        ),
        ({**CHOSEN, "observedGeneration": 1, "cacheKey": cache_key(SOURCE)}, None),  # of another spec
        ({**CHOSEN, "observedGeneration": 2, "cacheKey": "other"}, None),  # of another source
        ({"observedGeneration": 2, "cacheKey": cache_key(SOURCE), "phase": "Failed"}, None),  # none chosen
    ],
)
def test_resolved_files(status: dict[str, Any], files: tuple[str, ...] | None) -> None:
    found = model(SPEC, status)
    assert resolved_files(found) == files
    assert with_resolved_files(found).spec.files == (list(files) if files else None)
