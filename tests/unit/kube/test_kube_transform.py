"""Trimming objects before they are cached: only what a controller reads, plus what the cache needs."""

import copy
from typing import Any

import orjson
import pytest

from llmkube.kube.apply.compare import needs_apply
from llmkube.kube.cache import keep_only, keep_owned

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


OURS = "llmkube-controller"
STORED_DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": "9",
        "generation": 2,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {"app": "web", "team": "theirs"},
        "annotations": {"deployment.kubernetes.io/revision": "2"},
        "ownerReferences": [{"kind": "InferenceService", "name": "web", "uid": "o1", "controller": True}],
        "managedFields": [
            {
                "manager": OURS,
                "operation": "Apply",
                "apiVersion": "apps/v1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {
                    "f:metadata": {"f:labels": {"f:app": {}}, "f:ownerReferences": {'k:{"uid":"o1"}': {}}},
                    "f:spec": {
                        "f:template": {
                            "f:spec": {
                                "f:containers": {
                                    'k:{"name":"server"}': {".": {}, "f:image": {}, "f:name": {}}
                                }
                            }
                        }
                    },
                },
            },
            {
                "manager": "kube-controller-manager",
                "operation": "Update",
                "subresource": "status",
                "fieldsV1": {},
            },
        ],
    },
    "spec": {
        "replicas": 3,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
        "template": {
            "spec": {
                "containers": [{"name": "server", "image": "img:1", "imagePullPolicy": "IfNotPresent"}],
                "dnsPolicy": "ClusterFirst",
            }
        },
    },
    "status": {"replicas": 3, "readyReplicas": 2, "conditions": [{"type": "Available", "status": "True"}]},
}


def test_keep_owned_keeps_what_we_own_what_is_read_and_the_identity() -> None:
    cached = keep_owned(OURS, ("spec", "replicas"), ("spec", "strategy"), ("status", "readyReplicas"))(
        copy.deepcopy(STORED_DEPLOYMENT)
    )
    assert cached == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "ns",
            "uid": "u1",
            "resourceVersion": "9",
            "generation": 2,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "team": "theirs"},
            "ownerReferences": [{"kind": "InferenceService", "name": "web", "uid": "o1", "controller": True}],
            "managedFields": [
                {
                    "manager": OURS,
                    "operation": "Apply",
                    "apiVersion": "apps/v1",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": orjson.dumps(
                        STORED_DEPLOYMENT["metadata"]["managedFields"][0]["fieldsV1"]
                    ).decode(),
                }
            ],
        },
        # the container's server defaults (imagePullPolicy) and the pod's (dnsPolicy) are not ours
        "spec": {
            "replicas": 3,
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%"}},
            "template": {"spec": {"containers": [{"name": "server", "image": "img:1"}]}},
        },
        "status": {"readyReplicas": 2},
    }


def test_the_owned_fields_compare_answers_the_same_on_the_trimmed_copy() -> None:
    transform = keep_owned(OURS, ("spec", "replicas"))
    cached = transform(copy.deepcopy(STORED_DEPLOYMENT))
    same = {"metadata": {"name": "web", "labels": {"app": "web"}, "ownerReferences": [
        {"kind": "InferenceService", "name": "web", "uid": "o1", "controller": True}]},
        "spec": {"template": {"spec": {"containers": [{"name": "server", "image": "img:1"}]}}}}  # fmt: skip
    changed = copy.deepcopy(same)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"
    for desired in (same, changed):
        assert needs_apply(desired, cached, OURS) == needs_apply(desired, STORED_DEPLOYMENT, OURS)
    assert needs_apply(same, cached, OURS) == []


def test_keep_owned_without_an_entry_of_ours_keeps_identity_and_paths_only() -> None:
    stored = copy.deepcopy(STORED_DEPLOYMENT)
    stored["metadata"]["managedFields"] = [
        {"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}
    ]
    cached = keep_owned(OURS, ("spec", "replicas"))(stored)
    assert cached["spec"] == {"replicas": 3}
    assert cached["metadata"]["managedFields"] == [{"manager": "kubectl", "operation": "Update"}]
    assert needs_apply({"metadata": {"name": "web"}, "spec": {"replicas": 3}}, cached, OURS) == [
        f"{OURS} has not applied it yet"
    ]
