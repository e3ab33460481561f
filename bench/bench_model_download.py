"""Model download throughput and cache-hit time of the model downloader (the script the inference
pods' init container and a prefetch Job run: plan/model/download_scripts.py), on this machine,
over loopback, with the environment the planner gives it.

Cases, each against the same random file of --mib MiB, each run --repeat times (the best kept):
  * anchor: a plain `curl -o` of the file from the standard-library file server
    (llmkube_testing.fileserver, a separate process) - the ratio of every case is to it;
  * http: the downloader, one http(s) file (probe, .part, size check, fsync, rename);
  * http+sha256: the same with spec.sha256 (the whole file hashed before it is published);
  * hf: the downloader on an hf:// Model of two shards from the Hub stand-in (llmkube_testing.hfhub,
    in this process): /resolve/ and its 302 per shard, each shard checked against the SHA-256 the
    Hub announces;
  * s3: the downloader on an s3:// Model, the same file from a real S3 server (MinIO, built by
    `hack/build-tools.sh minio`, a separate process on loopback) in a private bucket, every
    request signed with SigV4 (curl's --aws-sigv4) and checked by the server; s3+shards: the two
    shards under a prefix (skipped, with a note, when MinIO is not built);
  * cache hit: the downloader again on the filled cache (IfNotPresent: no request at all), and
    with refreshPolicy OnChange (one ETag probe per file).

Usage: .venv/bin/python bench/bench_model_download.py [--mib 256] [--repeat 3] [--label NAME]
Prints one JSON object; stores it in bench/results/model-download-<label>-<time>.json.
"""

import argparse
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from llmkube_testing.hfhub import running_hub
from llmkube_testing.s3server import minio_binary, running_minio

from llmkube.api.model import Model
from llmkube.plan.model.download_scripts import downloader_script
from llmkube.plan.model.downloader import DownloadTarget, download_env
from llmkube.plan.model.remote import RemoteSource, remote_source

RESULTS = Path(__file__).resolve().parent / "results"
SCRIPT = downloader_script(local_source=False, custom_ca=False)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def planned_env(spec: dict[str, object], endpoint: str, cache: Path) -> dict[str, str]:
    model = Model.model_validate({"metadata": {"name": "bench", "namespace": "ml"}, "spec": spec})
    remote = remote_source(model, endpoint)
    assert isinstance(remote, RemoteSource)
    target = DownloadTarget(
        remote,
        str(spec["source"]),
        str(cache),
        model.spec.sha256,
        on_change=model.spec.refresh_policy == "OnChange",
        hf_endpoint=endpoint,
    )
    env = {str(item["name"]): str(item.get("value", "")) for item in download_env(target)}
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env}


def timed(run: Callable[[], None], repeat: int, before: Callable[[], None] = lambda: None) -> float:
    best = float("inf")
    for _ in range(repeat):
        before()
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def downloader(env: dict[str, str]) -> Callable[[], None]:
    def run() -> None:
        result = subprocess.run(["sh", "-c", SCRIPT], env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(result.stdout + result.stderr)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--label", default="loopback")
    args = parser.parse_args()
    size = args.mib << 20
    work = Path(tempfile.mkdtemp(prefix="bench-download-"))
    served = work / "served"
    served.mkdir()
    body = os.urandom(size)
    (served / "model.gguf").write_bytes(body)
    half = size // 2
    shards = {"m-00001-of-00002.gguf": body[:half], "m-00002-of-00002.gguf": body[half:]}
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "llmkube_testing.fileserver", str(served), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/model.gguf"
    try:
        for _ in range(100):
            if subprocess.run(["curl", "-sf", "-I", url], capture_output=True, check=False).returncode == 0:
                break
            time.sleep(0.1)
        cache = work / "cache"

        def empty_cache() -> None:
            shutil.rmtree(cache, ignore_errors=True)

        seconds: dict[str, float] = {}
        out = work / "anchor.gguf"
        seconds["anchor"] = timed(
            lambda: subprocess.run(["curl", "-sS", "-o", str(out), "--url", url], check=True),
            args.repeat,
            lambda: out.unlink(missing_ok=True),
        )
        http = planned_env({"source": url}, "", cache)
        seconds["http"] = timed(downloader(http), args.repeat, empty_cache)
        seconds["cache_hit"] = timed(downloader(http), args.repeat)
        on_change = planned_env({"source": url, "refreshPolicy": "OnChange"}, "", cache)
        seconds["cache_hit_on_change"] = timed(downloader(on_change), args.repeat)
        digest = hashlib.sha256(body).hexdigest()
        seconds["http+sha256"] = timed(
            downloader(planned_env({"source": url, "sha256": digest}, "", cache)), args.repeat, empty_cache
        )
        with running_hub() as hub:
            hub.add("bench/split", shards)
            hf = planned_env({"source": "hf://bench/split@main", "files": list(shards)}, hub.base, cache)
            seconds["hf"] = timed(downloader(hf), args.repeat, empty_cache)
        if os.access(minio_binary(), os.X_OK):
            with running_minio(work) as s3:
                s3.make_bucket("bench")
                s3.put("bench", "one/model.gguf", served / "model.gguf")
                for name, shard in shards.items():
                    s3.put("bench", f"split/{name}", shard)
                keys = s3.credentials.secret_data(s3.endpoint)
                one = {**keys, **planned_env({"source": "s3://bench/one/model.gguf"}, "", cache)}
                seconds["s3"] = timed(downloader(one), args.repeat, empty_cache)
                split = {
                    **keys,
                    **planned_env({"source": "s3://bench/split", "files": list(shards)}, "", cache),
                }
                seconds["s3+shards"] = timed(downloader(split), args.repeat, empty_cache)
    finally:
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(work, ignore_errors=True)

    mib = size / (1 << 20)
    downloads = tuple(k for k in ("anchor", "http", "http+sha256", "hf", "s3", "s3+shards") if k in seconds)
    result = {
        "bench": "model-download",
        "mib": args.mib,
        "repeat": args.repeat,
        "cpus": os.cpu_count(),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "mib_per_second": {k: round(mib / seconds[k], 1) for k in downloads},
        "time_vs_anchor": {k: round(seconds[k] / seconds["anchor"], 2) for k in downloads},
        "note": "best of --repeat, loopback; hf hashes both shards (the Hub's SHA-256), as http+sha256 does"
        + (
            ""
            if "s3" in seconds
            else f"; no s3 case: {minio_binary()} is not built (bash hack/build-tools.sh minio)"
        ),
    }
    text = json.dumps(result, indent=2)
    print(text)
    RESULTS.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (RESULTS / f"model-download-{args.label}-{stamp}.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
