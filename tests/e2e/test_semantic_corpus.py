"""Hostile input the schema accepts but the controller must refuse or warn about: a table of cases,
each with the phase, condition (type, status, reason), message and Warning Event it must produce,
and no hot loop: the reconciles of each object stay bounded over an observation window once it has
settled. All cases run at once against the session's controller.

Add a row to CASES; `event=None` says no Event is expected. The schema-invalid corpus is
tests/faults/test_schema_invalid_corpus.py."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from e2e_support import (
    API,
    RunningController,
    conditions,
    eventually,
    reconcile_log,
    services_deleted_first,  # noqa: F401  (a fixture)
    settled,
    status_of,
    worked_through,
)
from llmkube_testing.rest import KubeRest

from llmkube.kube.types import ObjectKey

pytestmark = pytest.mark.usefixtures("services_deleted_first")

#: seconds during which a settled object may be reconciled at most MAX_RECONCILES more times
WINDOW = 30.0 if os.environ.get("LLMKUBE_FAULT_LONG") == "1" else 12.0
#: our own status write comes back once; a requeue on a fixed interval (PVCNotFound: 30 s) once more
MAX_RECONCILES = 2
HF = {"source": "org/model"}


@dataclass(frozen=True)
class Case:
    name: str
    #: the object judged: "isvc" (the InferenceService) or "model" (its Model)
    judged: str
    phase: str
    condition: tuple[str, str, str]  # type, status, reason
    message: tuple[str, ...]  # what the condition's message must contain
    event: str | None  # the Warning Event's reason (None: no Event expected)
    isvc: dict[str, Any] | None = field(default_factory=dict)  # spec (modelRef filled in); None: none
    model: dict[str, Any] | None = field(default_factory=lambda: dict(HF))  # spec; None: no Model


def _cpu(**spec: Any) -> dict[str, Any]:
    return {"skipModelInit": True, "resources": {"cpu": "100m", "memory": "128Mi"}, **spec}


LONG_NAME = "a-name-one-character-longer-than-a-label-value-may-be-0123456789"[:64]

CASES: list[Case] = [
    Case(
        "cpu-words",
        "isvc",
        "Failed",
        ("Degraded", "True", "InvalidSpec"),
        ("spec.resources.cpu", '"two"'),
        "InvalidSpec",
        isvc={"skipModelInit": True, "resources": {"cpu": "two"}},
    ),
    Case(
        "memory-words",
        "isvc",
        "Failed",
        ("Degraded", "True", "InvalidSpec"),
        ("spec.resources.memory", '"lots"'),
        "InvalidSpec",
        isvc={"skipModelInit": True, "resources": {"memory": "lots"}},
    ),
    Case(
        "host-memory-unit",
        "isvc",
        "Failed",
        ("Degraded", "True", "InvalidSpec"),
        ("spec.resources.hostMemory", '"8GB"'),
        "InvalidSpec",
        isvc={"skipModelInit": True, "resources": {"hostMemory": "8GB"}},
    ),
    Case(
        "gpu-memory-negative",
        "isvc",
        "Failed",
        ("Degraded", "True", "InvalidSpec"),
        ("spec.resources.gpuMemory", '"-8Gi"'),
        "InvalidSpec",
        isvc={"skipModelInit": True, "resources": {"gpuMemory": "-8Gi"}},
    ),
    Case(
        "generic-no-image",
        "isvc",
        "Failed",
        ("Degraded", "True", "InvalidSpec"),
        ("spec.image", 'required for runtime "generic"'),
        "InvalidSpec",
        isvc={"skipModelInit": True, "runtime": "generic"},
    ),
    Case(
        "missing-class",
        "isvc",
        "Failed",
        ("Degraded", "True", "InvalidSpec"),
        ("spec.priorityClassName", '"team-gold" does not exist'),
        "InvalidSpec",
        isvc=_cpu(priorityClassName="team-gold"),  # allowed (--allowed-priority-classes), but missing
    ),
    Case(
        "unlisted-class",
        "isvc",
        "Failed",
        ("Degraded", "True", "PolicyViolation"),
        (
            "spec.priorityClassName",
            '"no-such-class" is not allowed',
            "--allowed-priority-classes (team-gold)",
        ),
        "PolicyViolation",
        isvc=_cpu(priorityClassName="no-such-class"),
    ),
    Case(
        "min-above-max",
        "isvc",
        "Failed",
        ("Degraded", "True", "InvalidSpec"),
        ("spec.autoscaling",),
        "InvalidSpec",
        isvc=_cpu(autoscaling={"minReplicas": 5, "maxReplicas": 2}),
    ),
    Case(
        LONG_NAME,
        "isvc",
        "Failed",
        ("Degraded", "True", "InvalidSpec"),
        ("metadata.name", "at most 63"),
        "InvalidSpec",
        isvc=_cpu(),
    ),
    Case(
        "ignored-vllm",
        "isvc",
        "Ready",
        ("SpecValid", "False", "IgnoredSettings"),
        ("spec.vllmConfig", 'ignored by runtime "llamacpp"'),
        "IgnoredSetting",
        isvc=_cpu(vllmConfig={"dtype": "float16"}),
    ),
    Case(
        # The generic runtime's HPA falls back to llama.cpp's metric, which its server never
        # exports: the HPA is created as asked, and the warning names the field that fixes it.
        "generic-autoscaling-default-metric",
        "isvc",
        "Ready",
        ("SpecValid", "False", "IgnoredSettings"),
        ("spec.autoscaling.metrics", 'runtime "generic" does not export', "llamacpp:requests_processing"),
        "IgnoredSetting",
        isvc=_cpu(
            runtime="generic",
            image="registry.example/my-server:1",
            autoscaling={"minReplicas": 1, "maxReplicas": 2},
        ),
    ),
    Case(
        "flash-without-gpu",
        "isvc",
        "Ready",
        ("SpecValid", "False", "IgnoredSettings"),
        ("spec.flashAttention", "ignored without a GPU"),
        "IgnoredSetting",
        isvc=_cpu(flashAttention=True),
    ),
    Case(
        "moe-without-memory",
        "isvc",
        "Ready",
        ("Available", "True", "InferenceReady"),
        (),
        "MissingMemoryRequest",
        isvc={"skipModelInit": True, "moeCPUOffload": True},
    ),
    Case(
        "hf-without-skip",
        "isvc",
        "Ready",
        ("Available", "True", "InferenceReady"),
        (),
        "MissingSkipModelInit",
        isvc={"resources": {"cpu": "100m", "memory": "128Mi"}},
    ),
    Case(
        "no-model",
        "isvc",
        "Failed",
        ("Degraded", "True", "ModelNotFound"),
        ('Model "no-model-m" not found',),
        None,
        isvc=_cpu(),
        model=None,
    ),
    Case(
        "bare-file-name",
        "model",
        "Failed",
        ("Degraded", "True", "InvalidSource"),
        ('"model.gguf" is not a supported model source',),
        None,
        isvc=None,
        model={"source": "model.gguf"},
    ),
    Case(
        "pvc-without-path",
        "model",
        "Failed",
        ("Degraded", "True", "InvalidSource"),
        ("not a valid PVC source",),
        None,
        isvc=None,
        model={"source": "pvc://claim-only"},
    ),
    Case(
        "pvc-missing",
        "model",
        "Failed",
        ("Degraded", "True", "PVCNotFound"),
        ('"no-such-claim" not found',),
        None,
        isvc=None,
        model={"source": "pvc://no-such-claim/m.gguf"},
    ),
    Case(
        "local-outside-roots",
        "model",
        "Failed",
        ("Degraded", "True", "InvalidSource"),
        ("--model-local-roots",),
        None,
        isvc=None,
        model={"source": "file:///var/run/secrets/kubernetes.io/serviceaccount/token"},
    ),
]


def warning_reasons(admin: KubeRest, namespace: str, kind: str, name: str) -> set[str]:
    return {
        event["reason"]
        for event in admin.list("events.k8s.io/v1", "Event", namespace)
        if event.get("type") == "Warning"
        and (event.get("regarding") or {}).get("kind") == kind
        and (event.get("regarding") or {}).get("name") == name
    }


def judged(case: Case) -> tuple[str, str]:
    return ("InferenceService", case.name) if case.judged == "isvc" else ("Model", f"{case.name}-m")


Outcome = tuple[str | None, tuple[str, str, str] | None, str]


def outcome(admin: KubeRest, namespace: str, case: Case) -> Outcome:
    kind, name = judged(case)
    status = status_of(admin, kind, name, namespace)
    found = conditions(status).get(case.condition[0])
    triple = (found["type"], found["status"], found["reason"]) if found else None
    return status.get("phase"), triple, found["message"] if found else ""


def test_the_table_is_consistent() -> None:
    assert len({case.name for case in CASES}) == len(CASES)
    for case in CASES:
        assert case.judged in ("isvc", "model")
        assert case.judged == "model" or case.isvc is not None


async def test_every_case_fails_or_warns_as_expected_without_a_hot_loop(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    isvc_reconciles = reconcile_log(operator.controllers.inference_services.controller)
    model_reconciles = reconcile_log(operator.controllers.models.controller)
    for case in CASES:
        if case.model is not None:
            meta = {"name": f"{case.name}-m"}
            admin.create(
                {"apiVersion": API, "kind": "Model", "metadata": meta, "spec": case.model}, namespace=ns
            )
        if case.isvc is not None:
            spec = {"modelRef": f"{case.name}-m", **case.isvc}
            meta = {"name": case.name}
            admin.create(
                {"apiVersion": API, "kind": "InferenceService", "metadata": meta, "spec": spec}, namespace=ns
            )

    last: dict[str, Any] = {}

    def all_as_expected() -> bool:
        wrong = {}
        for case in CASES:
            phase, triple, message = outcome(admin, ns, case)
            if phase != case.phase or triple != case.condition or not all(m in message for m in case.message):
                wrong[case.name] = (phase, triple, message)
        last.clear()
        last.update(wrong)
        return not wrong

    try:
        await eventually(all_as_expected, within=120, what="every case in its expected state")
    except TimeoutError:
        raise AssertionError(f"not as expected: {last}") from None

    def events_as_expected() -> bool:
        missing = {}
        for case in CASES:
            if case.event is not None:
                reasons = warning_reasons(admin, ns, *judged(case))
                if case.event not in reasons:
                    missing[case.name] = reasons
        last.clear()
        last.update(missing)
        return not missing

    try:
        await eventually(events_as_expected, within=60, what="the Warning Events")
    except TimeoutError:
        raise AssertionError(f"Events missing: {last}") from None

    # No hot loop: once settled, every object is reconciled at most MAX_RECONCILES more times.
    def counts() -> dict[str, int]:
        found = {}
        for case in CASES:
            kind, name = judged(case)
            log: Callable[[ObjectKey], int] = model_reconciles
            if kind == "InferenceService":
                log = isvc_reconciles
            found[case.name] = log(ObjectKey(ns, name))
        return found

    await settled(operator.controllers.inference_services.controller)
    await settled(operator.controllers.models.controller)
    before = counts()
    await asyncio.sleep(WINDOW)
    # Both controllers have worked through whatever came due in the window: only then do the
    # counts say how often each object was reconciled in it.
    await worked_through(operator.controllers.inference_services.controller, ns)
    await worked_through(operator.controllers.models.controller, ns)
    after = counts()
    more = {name: after[name] - before[name] for name in before}
    loops = {name: count for name, count in more.items() if count > MAX_RECONCILES}
    assert not loops, f"reconciled more than {MAX_RECONCILES} times in {WINDOW:.0f}s: {loops}"
