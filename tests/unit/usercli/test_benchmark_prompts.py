"""What `llmkube benchmark` sends (pure)."""

import orjson
import pytest

from llmkube.usercli.benchmark.prompts import (
    WORDS,
    PromptFileError,
    RequestShape,
    parse_prompt_file,
    request_body,
    synthetic_prompt,
)
from llmkube.usercli.parser import concurrency_levels


def test_synthetic_prompts_have_the_word_count_differ_by_index_and_repeat_by_seed() -> None:
    first = synthetic_prompt(128, 0)
    assert len(first.split(" ")) == 128
    assert all(word in WORDS for word in first.split(" "))
    assert synthetic_prompt(128, 0) == first
    assert synthetic_prompt(128, 1) != first  # no two requests share a prompt (no prompt-cache hits)
    assert synthetic_prompt(128, 0, seed=1) != first
    assert len(synthetic_prompt(0, 0).split(" ")) == 1


def test_a_prompt_file_holds_text_lines_and_json_lines() -> None:
    text = (
        "Tell me a story\n\n"
        '{"prompt": "Count to ten"}\n'
        '{"messages": [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}]}\n'
    )
    assert parse_prompt_file(text) == [
        "Tell me a story",
        "Count to ten",
        [{"role": "system", "content": "Be brief"}, {"role": "user", "content": "Hi"}],
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "the file holds no prompt"),
        ("\n  \n", "the file holds no prompt"),
        ("ok\n{broken", "line 2: not JSON"),
        ('{"messages": []}', 'line 1: a JSON line needs "prompt" (text) or "messages" (a list)'),
        ('{"prompt": 3}', 'line 1: a JSON line needs "prompt"'),
    ],
)
def test_prompt_file_mistakes_name_the_line(text: str, message: str) -> None:
    with pytest.raises(PromptFileError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_prompt_file(text)


@pytest.mark.parametrize(
    ("prompt", "shape", "body"),
    [
        (
            "hi",
            RequestShape("chat", 64, stream=True),
            {
                "max_tokens": 64,
                "stream": True,
                "messages": [{"role": "user", "content": "hi"}],
                "stream_options": {"include_usage": True},
                "ignore_eos": True,
            },
        ),
        (
            "hi",
            RequestShape("completions", 8, stream=False, model="m", ignore_eos=False, temperature=0.0),
            {"max_tokens": 8, "stream": False, "prompt": "hi", "model": "m", "temperature": 0.0},
        ),
        (
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
            RequestShape("completions", 8, stream=False, ignore_eos=False),
            {"max_tokens": 8, "stream": False, "prompt": "a\nb"},
        ),
        (
            [{"role": "user", "content": "a"}],
            RequestShape("chat", 8, stream=False, ignore_eos=False),
            {"max_tokens": 8, "stream": False, "messages": [{"role": "user", "content": "a"}]},
        ),
    ],
)
def test_request_bodies(prompt: object, shape: RequestShape, body: dict[str, object]) -> None:
    assert orjson.loads(request_body(prompt, shape)) == body  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "levels"), [("1", [1]), ("1,4,16", [1, 4, 16]), ("8, 2", [8, 2]), ("3,", [3])]
)
def test_concurrency_lists(text: str, levels: list[int]) -> None:
    assert concurrency_levels(text) == levels


@pytest.mark.parametrize("text", ["", "a", "1,x", "0", "4,-1"])
def test_bad_concurrency_lists_are_usage_errors(text: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        concurrency_levels(text)
