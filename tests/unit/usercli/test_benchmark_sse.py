"""Reading streamed OpenAI-style answers, line by line (pure)."""

import pytest

from llmkube.usercli.benchmark.sse import StreamState, answer_tokens


def stream(*lines: bytes) -> tuple[StreamState, list[bool]]:
    state = StreamState()
    return state, [state.feed(line) for line in lines]


CHAT = [
    b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n',
    b"\n",
    b'data: {"choices":[{"index":0,"delta":{"content":" Hello"},"finish_reason":null}]}\n',
    b'data: {"choices":[{"index":0,"delta":{"content":" world"},"finish_reason":null}]}\n',
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n',
    b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}\n',
    b"data: [DONE]\n",
]


def test_a_chat_stream_with_usage_is_complete_and_counted_by_usage() -> None:
    state, text = stream(*CHAT)
    assert text == [False, False, True, True, False, False, False]  # the role-only chunk is no text
    assert state.finished and state.done and state.error is None
    assert (state.chunks_with_text, state.output_tokens, state.prompt_tokens) == (2, 3, 7)


@pytest.mark.parametrize(
    ("lines", "finished", "tokens", "error"),
    [
        # llama.cpp without include_usage: counted by chunk; finish_reason alone completes it.
        (
            [
                b'data: {"choices":[{"delta":{"content":"a"}}]}',
                b'data: {"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}]}',
            ],
            True,
            2,
            None,
        ),
        # Completions: `text`.
        ([b'data: {"choices":[{"text":"x"}]}', b"data: [DONE]"], True, 1, None),
        # vLLM's reasoning models stream reasoning_content first.
        ([b'data: {"choices":[{"delta":{"reasoning_content":"hmm"}}]}'], False, 1, None),
        # Cut off: no finish_reason, no [DONE].
        ([b'data: {"choices":[{"delta":{"content":"a"}}]}'], False, 1, None),
        # SSE comments, event names and ids are skipped; no space after the colon is fine.
        (
            [b": keep-alive", b"event: message", b"id: 3", b'data:{"choices":[{"delta":{"content":"a"}}]}'],
            False,
            1,
            None,
        ),
        # Errors in the stream.
        # Errors in the stream: the server's own, by the code it gives (llama.cpp with a full KV
        # cache, after some tokens), and answers that are not OpenAI-style chunks.
        (
            [
                b'data: {"choices":[{"delta":{"content":"a"}}]}',
                b'data: {"error":{"code":500,"message":"Context size has been exceeded."}}',
            ],
            False,
            1,
            "stream-error-500",
        ),
        ([b'data: {"error":{"message":"out of memory"}}'], False, 0, "stream-error"),
        ([b'data: {"error":{"code":"oom"}}'], False, 0, "stream-error"),
        ([b'data: {"error":"no"}'], False, 0, "stream-error"),
        ([b"data: {not json"], False, 0, "bad-response"),
        ([b"data: [1, 2]"], False, 0, "bad-response"),
        # Nonsense fields do not count as text.
        ([b'data: {"choices":["x", {"delta": "y"}], "usage": {"completion_tokens": true}}'], False, 0, None),
    ],
)
def test_stream_lines(lines: list[bytes], finished: bool, tokens: int, error: str | None) -> None:
    state, _ = stream(*lines)
    assert (state.finished, state.output_tokens, state.error) == (finished, tokens, error)


@pytest.mark.parametrize(
    ("answer", "counted"),
    [
        (
            {
                "choices": [{"message": {"content": "hi"}}],
                "usage": {"completion_tokens": 12, "prompt_tokens": 5},
            },
            (12, 5),
        ),
        ({"choices": [{"text": "hi"}]}, (1, None)),  # no usage: one choice with text, length unknown
        ({"choices": [{"message": {"content": ""}}]}, (0, None)),
        ({"choices": []}, (0, None)),
        ({"error": {"message": "no"}}, None),
        ([1, 2], None),
        ({"choices": [{"message": {"content": "a"}}], "usage": {"completion_tokens": -1}}, (1, None)),
    ],
)
def test_whole_answers(answer: object, counted: tuple[int, int | None] | None) -> None:
    assert answer_tokens(answer) == counted
