"""`llmkube benchmark NAME`'s default sizes fit one slot of the service (contextSize over its
parallel slots, extraArgs winning as llama.cpp reads them), and the server's error messages are read
from the answers OpenAI-style servers give."""

from typing import Any

import pytest

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.usercli.benchmark.sizes import Sizes, fitted_sizes, slot_tokens, words_that_fit
from llmkube.usercli.benchmark.stats import MAX_DETAIL, server_message


def spec(**fields: Any) -> InferenceServiceSpec:
    return InferenceServiceSpec.model_validate({"modelRef": "m", **fields})


@pytest.mark.parametrize(
    ("fields", "slots"),
    [
        ({}, None),  # llama.cpp's context is the model's: unknown here
        ({"contextSize": 256}, (256, 4)),  # llama.cpp's automatic 4 slots
        ({"contextSize": 4096, "parallelSlots": 2}, (4096, 2)),
        ({"contextSize": 4096, "extraArgs": ["--ctx-size", "1024", "-np", "8"]}, (1024, 8)),
        ({"contextSize": 4096, "extraArgs": ["--parallel=1"]}, (4096, 1)),
        ({"runtime": "vllm", "contextSize": 256}, None),
    ],
)
def test_slots(fields: dict[str, Any], slots: tuple[int, int] | None) -> None:
    assert slot_tokens(spec(**fields)) == slots


def test_the_defaults_fit_a_small_slot_and_say_so() -> None:
    sample = spec(contextSize=256)  # make run's sample: 4 slots of 64 tokens
    sized = fitted_sizes(sample, None, None)
    assert (sized.prompt_tokens, sized.max_tokens) == (16, 24)
    assert sized.prompt_tokens + sized.max_tokens + 16 <= 64
    assert "contextSize 256 over 4 slot(s) is 64 tokens each" in sized.note


@pytest.mark.parametrize(
    ("fields", "prompt", "answer", "sizes"),
    [
        ({}, None, None, Sizes(128, 128)),
        ({"contextSize": 8192}, None, None, Sizes(128, 128)),  # 2048 a slot: the defaults fit
        ({"contextSize": 256}, 20, 30, Sizes(20, 30)),  # both given: the user's, as they are
        ({"contextSize": 256}, 20, None, Sizes(20, 28, "said")),  # the answer fills the rest
        ({"contextSize": 256}, None, 40, Sizes(8, 40, "said")),
    ],
)
def test_sizes(fields: dict[str, Any], prompt: int | None, answer: int | None, sizes: Sizes) -> None:
    sized = fitted_sizes(spec(**fields), prompt, answer)
    assert (sized.prompt_tokens, sized.max_tokens) == (sizes.prompt_tokens, sizes.max_tokens)
    assert bool(sized.note) == bool(sizes.note)  # a size made smaller than the default is said


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b'{"error":{"code":400,"message":"the request exceeds the available context size, '
            b'try increasing it","type":"exceed_context_size_error"}}',
            "the request exceeds the available context size, try increasing it",
        ),
        (
            b'{"error": {"code": 500, "message": "Context size has been exceeded."}}',
            "Context size has been exceeded.",
        ),
        (b'{"object": "error", "message": "max_tokens is too large"}', "max_tokens is too large"),  # vLLM
        (b'{"error": "Input validation error"}', "Input validation error"),  # TGI
        (b"upstream connect error\n  or disconnect", "upstream connect error or disconnect"),
        (b"", None),
    ],
)
def test_server_message(body: bytes, message: str | None) -> None:
    assert server_message(body) == message


def test_a_long_message_is_bounded() -> None:
    said = server_message(b"x" * 10_000)
    assert said is not None and len(said) == MAX_DETAIL


@pytest.mark.parametrize(
    ("slot", "answer", "template", "counted", "words"),
    [
        (64, 24, 10, (16, 16), 28),  # a token a word: the room is the slot less the answer and template
        (64, 24, 10, (16, 80), 5),  # a small vocabulary: five tokens a word
        (64, 60, 10, (16, 80), 1),  # no room: one word still
    ],
)
def test_words_that_fit(slot: int, answer: int, template: int, counted: tuple[int, int], words: int) -> None:
    assert words_that_fit(slot, answer, template, counted) == words
