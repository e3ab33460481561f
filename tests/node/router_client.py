"""A client of a ModelRouter, run in a pod of the node tier: its source is the pod's `python -c`
(standard library only: the Python of the controller image, which carries no test code), its one
argument a JSON plan, its output one JSON line per request on stdout (the pod's log).

Plans:
- `{"mode": "each", "base": URL, "models": [...]}`: GET /v1/models, then for each model one
  completion and one streamed completion;
- `{"mode": "load", "base": URL, "models": [...], "concurrency": N, "seconds": S, "max_tokens": T}`:
  N workers send requests for S seconds, alternating models and streaming, each prompt different
  (so the router's prefix affinity spreads them over a backend's pods); a last `summary` line;
- `{"mode": "embed", "base": URL, "model": M, "input": [...]}`: one POST /v1/embeddings (an
  `embeddings` line: status, backend, how many vectors of how many dimensions), then one chat
  completion for the same model (a `result` line);
- `{"mode": "one", "base": URL, "model": M, "stream": S, "max_tokens": T}`: one completion (the
  first request to a service scaled to zero wakes it)."""

import itertools
import json
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

CHAT = "/v1/chat/completions"


def complete(base: str, model: str, stream: bool, prompt: str, max_tokens: int) -> dict[str, Any]:
    """One request, and what its client saw. `status` is set once the answer's headers arrived: for
    a stream, that is when it started (the router never retries after that)."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "seed": 42,
        "ignore_eos": True,
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    out: dict[str, Any] = {
        "kind": "result",
        "model": model,
        "stream": stream,
        "status": None,
        "backend": None,
        "rule": None,
        "sent_at": time.time(),
        "headers_s": None,
        "first_s": None,
        "total_s": None,
        "chunks": 0,
        "done": False,
        "completion_tokens": None,
        "predicted": None,
        "content": "",
        "error": "",
    }
    started = time.monotonic()
    request = urllib.request.Request(
        base + CHAT,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=180) as response:
            out["status"] = response.status
            out["headers_s"] = time.monotonic() - started
            out["backend"] = response.headers.get("X-Llmkube-Backend")
            out["rule"] = response.headers.get("X-Llmkube-Rule")
            if stream:
                text = []
                for raw in response:
                    line = raw.decode(errors="replace").strip()
                    if not line.startswith("data: "):
                        continue
                    if line == "data: [DONE]":
                        out["done"] = True
                        break
                    chunk = json.loads(line[len("data: ") :])
                    if out["first_s"] is None:
                        out["first_s"] = time.monotonic() - started
                    out["chunks"] += 1
                    for choice in chunk.get("choices") or ():
                        text.append((choice.get("delta") or {}).get("content") or "")
                    if chunk.get("usage"):
                        out["completion_tokens"] = chunk["usage"].get("completion_tokens")
                    if chunk.get("timings"):  # llama-server's own count, in its last chunk
                        out["predicted"] = chunk["timings"].get("predicted_n")
                out["content"] = "".join(text)
            else:
                answer = json.loads(response.read())
                out["first_s"] = time.monotonic() - started
                out["content"] = answer["choices"][0]["message"]["content"]
                out["completion_tokens"] = answer["usage"]["completion_tokens"]
                out["done"] = True
    except urllib.error.HTTPError as error:
        out["status"] = error.code
        out["error"] = error.read().decode(errors="replace")[:400]
    except Exception as error:  # a reset, a cut stream, a timeout: what the client saw
        out["error"] = f"{type(error).__name__}: {error}"
    out["total_s"] = time.monotonic() - started
    out["ended_at"] = time.time()
    return out


def emit(line: dict[str, Any], lock: threading.Lock) -> None:
    with lock:
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()


def each(plan: dict[str, Any], lock: threading.Lock) -> None:
    with urllib.request.urlopen(plan["base"] + "/v1/models", timeout=30) as response:
        models = json.loads(response.read())
    emit({"kind": "models", "status": response.status, "ids": [m["id"] for m in models["data"]]}, lock)
    for model in plan["models"]:
        for stream in (False, True):
            emit(complete(plan["base"], model, stream, f"Hello {model}, who are you?", 16), lock)


def load(plan: dict[str, Any], lock: threading.Lock) -> None:
    deadline = time.monotonic() + float(plan["seconds"])
    models: list[str] = plan["models"]
    counter = itertools.count()
    sent = [0]

    def worker() -> None:
        while time.monotonic() < deadline:
            i = next(counter)
            with lock:
                sent[0] += 1
            model = models[i % len(models)]
            stream = (i // len(models)) % 2 == 1
            prompt = f"Request {i}: tell me a story about the number {i}."
            result = complete(plan["base"], model, stream, prompt, int(plan["max_tokens"]))
            emit({**result, "i": i}, lock)

    threads = [threading.Thread(target=worker) for _ in range(int(plan["concurrency"]))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    emit({"kind": "summary", "sent": sent[0]}, lock)


def embed(plan: dict[str, Any], lock: threading.Lock) -> None:
    body = json.dumps({"model": plan["model"], "input": plan["input"]}).encode()
    request = urllib.request.Request(
        plan["base"] + "/v1/embeddings",
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    out: dict[str, Any] = {
        "kind": "embeddings",
        "status": None,
        "backend": None,
        "count": 0,
        "dims": [],
        "error": "",
    }
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            out["status"] = response.status
            out["backend"] = response.headers.get("X-Llmkube-Backend")
            answer = json.loads(response.read())
            vectors = [item["embedding"] for item in answer["data"]]
            out["count"] = len(vectors)
            out["dims"] = sorted({len(v) for v in vectors})
            out["finite"] = all(isinstance(x, float) for v in vectors for x in v)
    except urllib.error.HTTPError as error:
        out["status"] = error.code
        out["error"] = error.read().decode(errors="replace")[:500]
    emit(out, lock)
    emit(complete(plan["base"], plan["model"], False, "Hello, who are you?", 8), lock)


def one(plan: dict[str, Any], lock: threading.Lock) -> None:
    stream = bool(plan["stream"])
    emit(complete(plan["base"], plan["model"], stream, "Hello, who are you?", int(plan["max_tokens"])), lock)


def main() -> None:
    plan = json.loads(sys.argv[-1])
    lock = threading.Lock()
    emit({"kind": "start", "at": time.time()}, lock)
    {"each": each, "load": load, "embed": embed, "one": one}[plan["mode"]](plan, lock)


if __name__ == "__main__":
    main()
