"""`llmkube chat` streams: the reader of a streamed answer's lines (pure), bounded. The command
through a real port-forward: tests/e2e/test_usercli.py and tests/e2e/test_port_forward_streaming.py."""

import pytest

from llmkube.usercli.chat_stream import MAX_STREAM_BYTES, ChatStream


def test_pieces_usage_and_the_end() -> None:
    stream = ChatStream()
    lines = [
        b": a comment\n",
        b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n',
        b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n',
        b"\n",
        b'data: {"choices":[{"delta":{"content":"lo"},"finish_reason":"stop"}]}\n',
        b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n',
        b"data: [DONE]\n",
    ]
    assert "".join(stream.feed(line) for line in lines) == "Hello"
    assert stream.done and stream.error is None
    assert stream.summary() == "5 prompt + 2 completion tokens"


def test_an_error_chunk_is_the_servers_words() -> None:
    stream = ChatStream()
    stream.feed(b'data: {"choices":[{"delta":{"content":"a"}}]}\n')
    assert stream.feed(b'data: {"error":{"code":500,"message":"Context size has been exceeded."}}\n') == ""
    assert stream.done and stream.error == "Context size has been exceeded."


@pytest.mark.parametrize("line", [b"data: not json\n", b"data: [1, 2]\n", b"event: ping\n", b"id: 4\n"])
def test_lines_that_carry_no_text(line: bytes) -> None:
    stream = ChatStream()
    assert stream.feed(line) == "" and not stream.done and stream.error is None


def test_an_endless_answer_is_stopped() -> None:
    stream = ChatStream()
    line = b'data: {"choices":[{"delta":{"content":"' + b"x" * 60_000 + b'"}}]}\n'
    read = 0
    while not stream.done:
        stream.feed(line)
        read += len(line)
    assert read <= MAX_STREAM_BYTES + len(line)
    assert stream.error is not None and "longer than" in stream.error
