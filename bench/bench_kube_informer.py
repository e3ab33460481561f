"""Informer ingest throughput and cache memory, from a synthetic watch stream (prints one JSON object).

A fake transport serves an empty LIST, then a WATCH stream of N ADDED events for ~3.4 KB
Deployment-like objects carrying two managedFields entries (ours and kubectl's), cut into 64 KiB
chunks, then N MODIFIED events for the same objects.  Measured: µs/event through line splitting,
orjson, transform, store and indexes, for the initial burst (default GC) and for the updates after
``gc.freeze()`` (what the Manager does once its caches synced); retained memory per cached object
(tracemalloc), with and without the default transform.

    .venv/bin/python bench/bench_kube_informer.py [--objects 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import orjson

from llmkube.kube.cache import Informer
from llmkube.kube.cache.lines import LineSplitter
from llmkube.kube.cache.store import BY_CONTROLLER_UID, by_controller_uid, by_label
from llmkube.kube.resource import DEPLOYMENTS
from llmkube.kube.rest import ApiClient, RequestTimeout
from llmkube.manager import configure_logging

CHUNK = 64 * 1024


def deployment(index: int) -> dict[str, Any]:
    name = f"svc-{index:06d}"
    labels = {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/managed-by": "llmkube",
        "inference.llmkube.dev/service": name,
    }
    container = {
        "name": "server",
        "image": "ghcr.io/ggml-org/llama.cpp:server-cuda-b4000",
        "args": [
            "--model",
            f"/models/{name}.gguf",
            "--host",
            "0.0.0.0",
            "--port",
            "8080",
            "--n-gpu-layers",
            "99",
        ],
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
        "resources": {
            "limits": {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": "1"},
            "requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
        },
        "readinessProbe": {
            "httpGet": {"path": "/health", "port": "http", "scheme": "HTTP"},
            "periodSeconds": 10,
        },
        "volumeMounts": [{"name": "models", "mountPath": "/models", "readOnly": True}],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
    }
    ours = {
        "f:metadata": {"f:labels": {f"f:{key}": {} for key in labels}, "f:ownerReferences": {}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},
            "f:template": {
                "f:metadata": {"f:labels": {}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"server"}': {
                            ".": {},
                            "f:args": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {},
                            "f:resources": {},
                            "f:readinessProbe": {},
                        }
                    }
                },
            },
        },
    }
    controller = {
        "f:metadata": {"f:annotations": {".": {}, "f:deployment.kubernetes.io/revision": {}}},
        "f:status": {
            "f:availableReplicas": {},
            "f:conditions": {
                ".": {},
                'k:{"type":"Available"}': {
                    ".": {},
                    "f:lastTransitionTime": {},
                    "f:lastUpdateTime": {},
                    "f:message": {},
                    "f:reason": {},
                    "f:status": {},
                    "f:type": {},
                },
            },
            "f:observedGeneration": {},
            "f:readyReplicas": {},
            "f:replicas": {},
            "f:updatedReplicas": {},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": f"team-{index % 50}",
            "uid": f"00000000-0000-4000-8000-{index:012d}",
            "resourceVersion": str(1000 + index),
            "generation": 1,
            "creationTimestamp": "2030-01-01T00:00:00Z",
            "labels": labels,
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [
                {
                    "apiVersion": "inference.llmkube.dev/v1alpha1",
                    "kind": "InferenceService",
                    "name": name,
                    "uid": f"11111111-0000-4000-8000-{index:012d}",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "llmkube-controller",
                    "operation": "Apply",
                    "apiVersion": "apps/v1",
                    "time": "2030-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": ours,
                },
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "apps/v1",
                    "time": "2030-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": controller,
                    "subresource": "status",
                },
            ],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {
                    "containers": [container],
                    "volumes": [
                        {"name": "models", "persistentVolumeClaim": {"claimName": "llmkube-model-cache"}}
                    ],
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30,
                    "dnsPolicy": "ClusterFirst",
                    "schedulerName": "default-scheduler",
                },
            },
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
            },
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
        },
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "updatedReplicas": 1,
            "readyReplicas": 1,
            "availableReplicas": 1,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "lastUpdateTime": "2030-01-01T00:00:10Z",
                    "lastTransitionTime": "2030-01-01T00:00:10Z",
                    "reason": "MinimumReplicasAvailable",
                    "message": "Deployment has minimum availability.",
                }
            ],
        },
    }


class _Response:
    def __init__(self, body: bytes, chunks: asyncio.Queue[bytes] | None) -> None:
        self._body = body
        self._chunks = chunks

    @property
    def status(self) -> int:
        return 200

    @property
    def headers(self) -> Mapping[str, str]:
        return {}

    async def read(self) -> bytes:
        return self._body

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        assert self._chunks is not None
        while True:  # an open watch: whatever the benchmark feeds, forever
            yield await self._chunks.get()


class SyntheticApi:
    def __init__(self) -> None:
        self.stream: asyncio.Queue[bytes] = asyncio.Queue()

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        request_timeout: RequestTimeout,
    ) -> Any:
        return self._respond("watch=true" in url)

    @asynccontextmanager
    async def _respond(self, watch: bool) -> AsyncIterator[_Response]:
        if watch:
            yield _Response(b"", self.stream)
        else:
            yield _Response(b'{"kind":"DeploymentList","metadata":{"resourceVersion":"1"},"items":[]}', None)

    async def close(self) -> None:
        return None


def watch_stream(objects: int, event: str = "ADDED", generation: int = 1) -> tuple[list[bytes], int]:
    lines = []
    for index in range(objects):
        obj = deployment(index)
        obj["metadata"]["resourceVersion"] = str(1000 + generation * objects + index)
        obj["metadata"]["generation"] = generation
        lines.append(orjson.dumps({"type": event, "object": obj}) + b"\n")
    stream = b"".join(lines)
    return [stream[offset : offset + CHUNK] for offset in range(0, len(stream), CHUNK)], len(stream)


async def feed_and_wait(api: SyntheticApi, chunks: list[bytes], done: asyncio.Event) -> float:
    done.clear()
    started = time.perf_counter()
    for chunk in chunks:
        api.stream.put_nowait(chunk)
    await done.wait()
    return time.perf_counter() - started


async def run_informer(objects: int, *, strip: bool, updates: bool) -> dict[str, Any]:
    """Ingest N ADDED events into an empty cache; optionally freeze the GC (as the Manager does
    after its caches sync) and replay N MODIFIED events: the steady state of a running operator."""
    api = SyntheticApi()
    client = ApiClient("https://synthetic:6443", transport=api)
    indexers = {BY_CONTROLLER_UID: by_controller_uid, "service": by_label("inference.llmkube.dev/service")}
    informer = Informer(
        client, DEPLOYMENTS, transform=None if strip else (lambda obj: obj), indexers=indexers
    )
    done = asyncio.Event()
    seen = 0

    def count(change: Any) -> None:
        nonlocal seen
        seen += 1
        if seen % objects == 0:
            done.set()

    informer.add_handler(count)
    informer.start()
    await informer.wait_for_sync()
    added, _ = watch_stream(objects)
    result: dict[str, Any] = {"initial_burst_s": await feed_and_wait(api, added, done)}
    assert len(informer.store) == objects
    if updates:
        modified, _ = watch_stream(objects, "MODIFIED", generation=2)
        gc.collect()
        gc.freeze()
        result["updates_after_freeze_s"] = await feed_and_wait(api, modified, done)
        gc.unfreeze()
    await informer.stop()
    result["store"] = informer.store
    return result


def measure(objects: int, *, strip: bool) -> dict[str, Any]:
    gc.collect()
    tracemalloc.start()
    baseline = tracemalloc.get_traced_memory()[0]
    traced = asyncio.run(run_informer(objects, strip=strip, updates=False))
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - baseline
    tracemalloc.stop()
    del traced
    gc.collect()
    # Timings again without tracemalloc (it slows allocation-heavy code several times over).
    timed = asyncio.run(run_informer(objects, strip=strip, updates=True))
    return {
        "initial_burst_us_per_event": round(timed["initial_burst_s"] / objects * 1e6, 2),
        "initial_burst_events_per_s": round(objects / timed["initial_burst_s"]),
        "updates_after_gc_freeze_us_per_event": round(timed["updates_after_freeze_s"] / objects * 1e6, 2),
        "retained_bytes_per_object": round(retained / objects),
        "kib_per_object": round(retained / objects / 1024, 2),
    }


def line_splitter_throughput(chunks: list[bytes], stream_bytes: int) -> dict[str, float]:
    started = time.perf_counter()
    splitter = LineSplitter()
    lines = sum(len(splitter.feed(chunk)) for chunk in chunks)
    elapsed = time.perf_counter() - started
    return {"lines": lines, "mib_per_s": round(stream_bytes / elapsed / 2**20, 1)}


def orjson_parse_only(chunks: list[bytes], objects: int) -> dict[str, float]:
    """orjson alone: discarding each result, and keeping them all (the difference is the cyclic
    GC traversing an ever larger heap of young dicts)."""
    lines = [line for line in b"".join(chunks).split(b"\n") if line]
    gc.collect()
    started = time.perf_counter()
    for line in lines:
        orjson.loads(line)
    discarded = time.perf_counter() - started
    gc.collect()
    started = time.perf_counter()
    kept = [orjson.loads(line) for line in lines]
    retained = time.perf_counter() - started
    del kept
    return {
        "discarded_us_per_event": round(discarded / objects * 1e6, 2),
        "kept_us_per_event": round(retained / objects * 1e6, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=10_000)
    objects = parser.parse_args().objects
    configure_logging("warning", "json")  # stdout carries only the JSON result
    chunks, stream_bytes = watch_stream(objects)
    results = {
        "python": sys.version.split()[0],
        "objects": objects,
        "event_json_bytes": round(stream_bytes / objects),
        "orjson_parse_only": orjson_parse_only(chunks, objects),
        "line_splitter": line_splitter_throughput(chunks, stream_bytes),
        "informer_default_transform": measure(objects, strip=True),
        "informer_keep_everything": measure(objects, strip=False),
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
