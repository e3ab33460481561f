"""Trimming objects before they are cached: only what a controller reads, plus what the cache needs."""

from typing import Any

import pytest

from llmkube.kube.transform import keep_only

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-1",
        "uid": "u1",
        "resourceVersion": "42",
        "labels": {"nvidia.com/gpu.product": "A100"},
        "managedFields": [{"manager": "kubelet"}],
    },
    "status": {
        "capacity": {"nvidia.com/gpu": "8", "cpu": "96"},
        "images": [{"names": ["x"], "sizeBytes": 1}],
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}

IDENTITY = {"name": "gpu-1", "uid": "u1", "resourceVersion": "42"}


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (
            [("status", "capacity")],
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "gpu-1", "uid": "u1", "resourceVersion": "42"},
                "status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "96"}},
            },
        ),
        (  # a missing field is simply absent
            [("status", "allocatable")],
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "gpu-1", "uid": "u1", "resourceVersion": "42"},
            },
        ),
        (  # several paths, and a top-level one
            [("metadata", "labels"), ("kind",)],
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": "gpu-1",
                    "uid": "u1",
                    "resourceVersion": "42",
                    "labels": {"nvidia.com/gpu.product": "A100"},
                },
            },
        ),
    ],
)
def test_keep_only_keeps_the_paths_and_the_identity(
    paths: list[tuple[str, ...]], expected: dict[str, Any]
) -> None:
    assert keep_only(*paths)(NODE) == expected


def test_keep_only_keeps_what_tells_versions_and_deletions_apart() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": 2,
                        "deletionTimestamp": "2026-01-01T00:00:00Z", "annotations": {"a": "b"}}}  # fmt: skip
    assert keep_only()(pod) == {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": 2,
                     "deletionTimestamp": "2026-01-01T00:00:00Z"},
    }  # fmt: skip
