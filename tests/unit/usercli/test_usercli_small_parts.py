"""Small pure parts of the user commands: progress assessment, chat bodies and replies, the
port-forward channel framing, and kwok's stand-in server."""

import json
from typing import Any

from llmkube_testing.stdio_http import answer

from llmkube.kube.rest.portforward import _Channels
from llmkube.usercli.progress import assess
from llmkube.usercli.request import chat_body, chat_reply


def obj(phase: str | None, generation: int = 1, observed: int | None = 1, **extra: Any) -> dict[str, Any]:
    conditions = extra.pop("conditions", [])
    if observed is not None:
        conditions = [*conditions, {"type": "Available", "status": "False", "observedGeneration": observed}]
    return {
        "metadata": {"name": "x", "generation": generation},
        "spec": {"modelRef": "x"},
        "status": {"phase": phase, "conditions": conditions, **extra} if phase else {},
    }


def test_ready_when_both_are_ready_for_the_current_generation() -> None:
    assert assess(obj("Ready"), obj("Ready", readyReplicas=1, desiredReplicas=1)).outcome == "ready"
    # A re-deploy: the status still describes generation 1 while the spec is at 2.
    stale = obj("Ready", generation=2, observed=1, readyReplicas=1, desiredReplicas=1)
    progress = assess(obj("Ready"), stale)
    assert progress.outcome == "waiting"
    assert "Service: Pending" in progress.line


def test_failures_stop_the_wait_with_the_reason() -> None:
    degraded = [
        {"type": "Degraded", "status": "True", "reason": "InvalidSpec", "message": "spec.image: required"}
    ]
    progress = assess(obj("Ready"), obj("Failed", conditions=degraded))
    assert progress.outcome == "failed"
    assert progress.detail == "the InferenceService failed: InvalidSpec: spec.image: required"
    model_failed = obj(
        "Failed", conditions=[{"type": "Degraded", "status": "True", "reason": "DownloadFailed"}]
    )
    assert assess(model_failed, None).detail == "the Model failed: DownloadFailed"


def test_the_progress_line_says_what_it_waits_for() -> None:
    waiting = obj("WaitingForGPU", queuePosition=2, waitingFor="nvidia.com/gpu: 2", desiredReplicas=1)
    line = assess(obj("Ready"), waiting).line
    assert line == (
        "Model: Ready, Service: WaitingForGPU (0/1 ready), "
        "waiting for GPUs: nvidia.com/gpu: 2 (queue position 2)"
    )


def test_chat_body_and_reply() -> None:
    body = chat_body("hi", system="be brief", max_tokens=8, model=None)
    assert body == {
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "max_tokens": 8,
    }
    assert chat_body("hi", system=None, max_tokens=8, model="m")["model"] == "m"
    reply = {
        "choices": [{"message": {"content": "hello"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1},
    }
    assert chat_reply(reply) == ("hello", "3 prompt + 1 completion tokens")
    assert chat_reply({"choices": [{"text": "legacy"}]}) == ("legacy", "")


def test_port_forward_channels_drop_the_port_prefix_even_when_split() -> None:
    channels = _Channels()
    port = (8080).to_bytes(2, "little")
    assert channels.payload(b"\x00" + port[:1]) == (0, b"")
    assert channels.payload(b"\x00" + port[1:] + b"HTTP/1.1") == (0, b"HTTP/1.1")
    assert channels.payload(b"\x00 200") == (0, b" 200")
    assert channels.payload(b"\x01" + port + b"boom") == (1, b"boom")


def test_kwok_stand_in_answers_like_an_openai_server() -> None:
    status, payload = answer(
        "POST", "/v1/chat/completions", json.dumps({"messages": [{"content": "hi"}]}).encode()
    )
    assert status == 200
    assert payload["choices"][0]["message"]["content"].endswith("You said: hi")
    assert answer("GET", "/health", b"") == (200, {"status": "ok"})
    assert answer("GET", "/v1/models", b"")[1]["data"][0]["id"] == "kwok-stand-in"
    assert answer("GET", "/nope", b"")[0] == 404
    assert answer("POST", "/v1/chat/completions", b"{")[0] == 400
