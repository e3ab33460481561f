"""fieldsV1 pruning and the owned-fields compare that decides whether an apply is needed."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from llmkube.kube.apply.compare import clean_intent, differences, needs_apply, normalise, quantity_value
from llmkube.kube.managed_fields import owned_fields, prune_to_owned

ME = "llmkube-controller"

# What the API server records for our apply of DESIRED below (shape as produced by
# structured-merge-diff: key fields are owned inside their k: element, '.' marks owned nodes).
OUR_FIELDS: dict[str, Any] = {
    "f:metadata": {
        "f:labels": {"f:app": {}, "f:app.kubernetes.io/managed-by": {}},
        "f:ownerReferences": {'k:{"uid":"owner-uid"}': {}},
    },
    "f:spec": {
        "f:replicas": {},
        "f:selector": {},
        "f:template": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:containers": {
                    'k:{"name":"server"}': {
                        ".": {},
                        "f:args": {},
                        "f:image": {},
                        "f:name": {},
                        "f:ports": {
                            'k:{"containerPort":8080,"protocol":"TCP"}': {
                                ".": {},
                                "f:containerPort": {},
                                "f:name": {},
                            }
                        },
                        "f:resources": {"f:limits": {"f:cpu": {}, "f:memory": {}}},
                    }
                },
                "f:volumes": {'k:{"name":"cache"}': {".": {}, "f:emptyDir": {}, "f:name": {}}},
            },
        },
    },
}

DESIRED: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "web",
        "namespace": "ns",
        "labels": {"app": "web", "app.kubernetes.io/managed-by": "llmkube"},
        "ownerReferences": [
            {"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "InferenceService", "name": "web",
             "uid": "owner-uid", "controller": True, "blockOwnerDeletion": True}
        ],
    },
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {
                        "name": "server",
                        "image": "llama:1",
                        "args": ["--port", "8080"],
                        "ports": [{"name": "http", "containerPort": 8080}],
                        "resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}},
                    }
                ],
                "volumes": [{"name": "cache", "emptyDir": {}}],
            },
        },
    },
}  # fmt: skip


def observed_from(desired: dict[str, Any], fields: dict[str, Any] = OUR_FIELDS) -> dict[str, Any]:
    """The object as the server returns it: defaults filled in, other managers' additions, and our
    managedFields entry."""
    obj = copy.deepcopy(desired)
    meta = obj["metadata"]
    meta.update(uid="d-uid", resourceVersion="77", generation=3, creationTimestamp="2030-01-01T00:00:00Z")
    meta["labels"]["added-by-someone"] = "x"
    meta["annotations"] = {"deployment.kubernetes.io/revision": "1"}
    meta["managedFields"] = [
        {
            "manager": ME,
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": fields,
        },
        {
            "manager": ME,
            "operation": "Apply",
            "subresource": "status",
            "fieldsType": "FieldsV1",
            "fieldsV1": {},
        },
    ]
    spec = obj["spec"]
    spec.update(
        revisionHistoryLimit=10,
        progressDeadlineSeconds=600,
        strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
    )
    pod = spec["template"]["spec"]
    pod.update(restartPolicy="Always", dnsPolicy="ClusterFirst", schedulerName="default-scheduler")
    server = pod["containers"][0]
    server.update(imagePullPolicy="IfNotPresent", terminationMessagePath="/dev/termination-log")
    server["ports"][0]["protocol"] = "TCP"
    server["resources"]["limits"]["cpu"] = "500m"  # the server canonicalises quantities
    server["env"] = [{"name": "INJECTED", "value": "by-a-webhook"}]
    pod["containers"].append({"name": "sidecar", "image": "proxy:2"})
    obj["status"] = {"replicas": 2, "observedGeneration": 3}
    return obj  # fmt: skip


def test_prune_keeps_exactly_what_we_own() -> None:
    pruned = prune_to_owned(observed_from(DESIRED), OUR_FIELDS)
    assert pruned["metadata"] == {
        "labels": {"app": "web", "app.kubernetes.io/managed-by": "llmkube"},
        "ownerReferences": DESIRED["metadata"]["ownerReferences"],
    }
    assert set(pruned["spec"]) == {"replicas", "selector", "template"}  # no server defaults
    (container,) = pruned["spec"]["template"]["spec"]["containers"]  # no sidecar
    assert container == {
        "name": "server",
        "image": "llama:1",
        "args": ["--port", "8080"],
        "ports": [{"name": "http", "containerPort": 8080}],  # no defaulted protocol
        "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
    }
    assert pruned["spec"]["template"]["spec"]["volumes"] == [{"name": "cache", "emptyDir": {}}]
    assert "status" not in pruned


PRUNE_TABLE = {
    "leaf keeps an atomic struct whole": (
        {"selector": {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "k"}]}},
        {"f:selector": {}},
        {"selector": {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "k"}]}},
    ),
    "leaf keeps an atomic list whole": ({"args": ["a", "b"]}, {"f:args": {}}, {"args": ["a", "b"]}),
    "fields not owned are dropped": ({"a": 1, "b": 2}, {"f:a": {}}, {"a": 1}),
    "owned fields missing from the object stay missing": ({"a": 1}, {"f:a": {}, "f:b": {}}, {"a": 1}),
    "keyed list with a compound key": (
        {"ports": [{"containerPort": 80, "protocol": "UDP", "name": "dns"},
                   {"containerPort": 80, "protocol": "TCP", "name": "web", "hostPort": 1}]},
        {"f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:name": {}}}},
        {"ports": [{"name": "web"}]},
    ),
    "keyed list keeps observed order and skips unowned items": (
        {"env": [{"name": "B", "value": "2"}, {"name": "X", "value": "x"}, {"name": "A", "value": "1"}]},
        {"f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}},
                   'k:{"name":"B"}': {".": {}, "f:name": {}, "f:value": {}}}},
        {"env": [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]},
    ),
    "an owned keyed item removed by someone else disappears": (
        {"env": [{"name": "X", "value": "x"}]},
        {"f:env": {'k:{"name":"A"}': {".": {}, "f:name": {}}}},
        {"env": []},
    ),
    "set values": (
        {"finalizers": ["theirs", "ours"]},
        {"f:finalizers": {'v:"ours"': {}}},
        {"finalizers": ["ours"]},
    ),
    "numeric set values": ({"codes": [1, 2, 3]}, {"f:codes": {"v:2": {}}}, {"codes": [2]}),
    "index elements": ({"list": ["a", "b"]}, {"f:list": {"i:1": {}}}, {"list": ["b"]}),
    "a dot-only node keeps the node but none of its children": (
        {"m": {"x": 1}}, {"f:m": {".": {}}}, {"m": {}},
    ),
    "granular maps keep only owned keys": (
        {"labels": {"a": "1", "b": "2"}}, {"f:labels": {"f:a": {}}}, {"labels": {"a": "1"}},
    ),
    "keys with dots and slashes": (
        {"annotations": {"example.com/x.y": "1", "z": "2"}},
        {"f:annotations": {"f:example.com/x.y": {}}},
        {"annotations": {"example.com/x.y": "1"}},
    ),
    "a malformed key never matches": ({"l": [{"name": "a"}]}, {"f:l": {"k:{not json": {}}}, {"l": []}),
}  # fmt: skip


@pytest.mark.parametrize(("value", "fields", "expected"), list(PRUNE_TABLE.values()), ids=list(PRUNE_TABLE))
def test_prune_table(value: Any, fields: dict[str, Any], expected: Any) -> None:
    assert prune_to_owned(value, fields) == expected


def test_owned_fields_picks_our_apply_entry_per_subresource() -> None:
    obj = {
        "metadata": {
            "managedFields": [
                {"manager": ME, "operation": "Update", "fieldsV1": {"f:a": {}}},
                {"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:b": {}}},
                {"manager": ME, "operation": "Apply", "fieldsV1": {"f:c": {}}},
                {"manager": ME, "operation": "Apply", "subresource": "status", "fieldsV1": {"f:status": {}}},
            ]
        }
    }
    assert owned_fields(obj, ME) == {"f:c": {}}
    assert owned_fields(obj, ME, "status") == {"f:status": {}}
    assert owned_fields(obj, "nobody") is None
    assert owned_fields({"metadata": {}}, ME) is None


def test_an_unchanged_intent_needs_no_apply() -> None:
    assert needs_apply(clean_intent(DESIRED), observed_from(DESIRED), ME) == []


CHANGES = {
    "image": (lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image="llama:2"),
              [".spec.template.spec.containers[0].image"]),
    "replicas": (lambda d: d["spec"].update(replicas=3), [".spec.replicas"]),
    "a label we stop applying": (lambda d: d["metadata"]["labels"].pop("app"), [".metadata.labels.app"]),
    "a new label": (lambda d: d["metadata"]["labels"].update(tier="gpu"), [".metadata.labels.tier"]),
    "an arg": (lambda d: d["spec"]["template"]["spec"]["containers"][0]["args"].append("-v"),
               [".spec.template.spec.containers[0].args"]),
    "a real quantity change": (lambda d: d["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
                               .update(cpu="1"), [".spec.template.spec.containers[0].resources.limits.cpu"]),
    "the selector": (lambda d: d["spec"]["selector"]["matchLabels"].update(v="2"),
                     [".spec.selector.matchLabels.v"]),
}  # fmt: skip


@pytest.mark.parametrize(("mutate", "expected"), list(CHANGES.values()), ids=list(CHANGES))
def test_changes_to_what_we_own_need_an_apply(mutate: Any, expected: list[str]) -> None:
    desired = copy.deepcopy(DESIRED)
    observed = observed_from(DESIRED)
    mutate(desired)
    assert needs_apply(clean_intent(desired), observed, ME) == expected


def test_a_field_taken_over_by_another_manager_needs_an_apply() -> None:
    fields = copy.deepcopy(OUR_FIELDS)
    del fields["f:spec"]["f:replicas"]  # `kubectl scale` now owns replicas
    observed = observed_from(DESIRED, fields)
    observed["spec"]["replicas"] = 5
    assert needs_apply(clean_intent(DESIRED), observed, ME) == [".spec.replicas"]


def test_changes_by_others_outside_our_fields_are_ignored() -> None:
    observed = observed_from(DESIRED)
    observed["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] = "now"
    observed["spec"]["template"]["spec"]["containers"][1]["image"] = "proxy:3"
    observed["spec"]["paused"] = True
    assert needs_apply(clean_intent(DESIRED), observed, ME) == []


def test_missing_object_or_entry_needs_an_apply() -> None:
    assert needs_apply(DESIRED, None, ME) == ["the object does not exist yet"]
    observed = observed_from(DESIRED)
    del observed["metadata"]["managedFields"]
    assert needs_apply(DESIRED, observed, ME) == [f"{ME} has not applied it yet"]
    # ... unless there is nothing to own: the server keeps no entry for an empty intent.
    empty_intent = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "ns"}}
    assert needs_apply(empty_intent, observed, ME) == []


def test_status_compare_uses_the_status_entry_only() -> None:
    observed = {
        "metadata": {
            "managedFields": [
                {"manager": ME, "operation": "Apply", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:phase": {}, "f:conditions": {'k:{"type":"Ready"}': {
                     ".": {}, "f:type": {}, "f:status": {}, "f:reason": {}}}}}},
            ]
        },
        "spec": {"anything": 1},
        "status": {"phase": "Ready", "observedBySomeoneElse": 1,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "Serving"}]},
    }  # fmt: skip
    desired = {"metadata": {"name": "x"}, "status": {"phase": "Ready", "conditions": [
        {"type": "Ready", "status": "True", "reason": "Serving"}]}}  # fmt: skip
    assert needs_apply(desired, observed, ME, subresource="status") == []
    desired["status"]["phase"] = "Failed"
    assert needs_apply(desired, observed, ME, subresource="status") == [".status.phase"]


NORMALISE = {
    "nulls and empty collections go": ({"a": None, "b": [], "c": {}, "d": {"e": None}}, {}),
    "an emptyDir stays": ({"volumes": [{"name": "v", "emptyDir": {}}]},
                          {"volumes": [{"name": "v", "emptyDir": {}}]}),
    "quantities canonicalise": (
        {"resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}, "requests": {"cpu": 1}}},
        {"resources": {"limits": {"cpu": "quantity:0.5", "memory": "quantity:1073741824"},
                       "requests": {"cpu": "quantity:1"}}},
    ),
    "numeric IntOrString ports become ints": ({"targetPort": "8080", "port": "http"},
                                              {"targetPort": 8080, "port": "http"}),
    "strings elsewhere are left alone": ({"env": [{"name": "N", "value": "0.5"}]},
                                         {"env": [{"name": "N", "value": "0.5"}]}),
    # Compared as the API server stores them: rounded up to 1n, and a value it cannot hold is text.
    "finer than 1n": ({"limits": {"cpu": "0.0000000001"}}, {"limits": {"cpu": "quantity:0.000000001"}}),
    "an exponent no quantity has": ({"limits": {"cpu": "1e999999999"}}, {"limits": {"cpu": "1e999999999"}}),
    "HPA target quantities": ({"target": {"type": "AverageValue", "averageValue": "100m"}},
                              {"target": {"type": "AverageValue", "averageValue": "quantity:0.1"}}),
}  # fmt: skip


@pytest.mark.parametrize(("value", "expected"), list(NORMALISE.values()), ids=list(NORMALISE))
def test_normalise(value: Any, expected: Any) -> None:
    assert normalise(value) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("500m", Decimal("0.5")),
        ("0.5", Decimal("0.5")),
        ("1Gi", Decimal(1073741824)),
        ("1024Mi", Decimal(1073741824)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
        ("1.5E2", Decimal(150)),
        ("100n", Decimal("1e-7")),
        ("2", Decimal(2)),
        (".5", Decimal("0.5")),
        (3, Decimal(3)),
        ("1Gb", None),
        ("abc", None),
        ("", None),
        (True, None),
        (None, None),
    ],
)
def test_quantity_value(text: Any, expected: Decimal | None) -> None:
    assert quantity_value(text) == expected


def test_differences_reports_paths_types_and_lengths() -> None:
    assert differences({"a": 1, "b": [1, 2]}, {"a": 1.0, "b": [1, 2]}) == []
    assert differences({"a": True}, {"a": 1}) == [".a"]
    assert differences({"l": [1, 2]}, {"l": [1]}) == [".l"]
    assert differences({"x": {"y": "1"}}, {"x": {}}) == [".x.y"]


def test_clean_intent_drops_empties_and_status_but_keeps_values_as_written() -> None:
    intent = clean_intent(
        {"metadata": {"name": "x", "labels": {}}, "spec": {"cpu": "0.5", "env": [], "v": [{"emptyDir": {}}]},
         "status": {"a": 1}}
    )  # fmt: skip
    assert intent == {"metadata": {"name": "x"}, "spec": {"cpu": "0.5", "v": [{"emptyDir": {}}]}}
