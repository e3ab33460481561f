"""The semantically-bad corpus (tests/bad_specs.py, 69 specs the schema accepts) against the running
controller, all at once: each service gets the phase, condition and message its case names and a
Warning Event saying the same; an error applies nothing; and nothing spins: once settled, each
service is reconciled at most twice more over the observation window (12 s; 30 s with
LLMKUBE_FAULT_LONG=1)."""

import asyncio
import os
from typing import Any

import pytest
from bad_specs import CORPUS, BadSpec
from e2e_support import (
    API,
    RunningController,
    conditions,
    eventually,
    hf_model,
    reconcile_log,
    services_deleted_first,  # noqa: F401  (a fixture)
    settled,
    status_of,
    worked_through,
)
from llmkube_testing.rest import KubeRest

from llmkube.kube.types import ObjectKey

pytestmark = pytest.mark.usefixtures("services_deleted_first")

WINDOW = 30.0 if os.environ.get("LLMKUBE_FAULT_LONG") == "1" else 12.0
MAX_RECONCILES = 2  # our own status write comes back once
EVENTS = "events.k8s.io/v1"


def name_of(index: int) -> str:
    return f"bad-{index:02d}"


def expected_condition(bad: BadSpec) -> tuple[str, str, str]:
    return (
        ("Degraded", "True", "InvalidSpec")
        if bad.severity == "error"
        else ("SpecValid", "False", "IgnoredSettings")
    )


def notes_by_service(admin: KubeRest, namespace: str) -> dict[str, list[tuple[str, str, str]]]:
    found: dict[str, list[tuple[str, str, str]]] = {}
    for event in admin.list(EVENTS, "Event", namespace):
        regarding = event.get("regarding") or {}
        if regarding.get("kind") == "InferenceService":
            found.setdefault(regarding["name"], []).append((event["type"], event["reason"], event["note"]))
    return found


def judged(admin: KubeRest, namespace: str, index: int, bad: BadSpec) -> str | None:
    """None when the service says what its case expects; else what is still missing."""
    status = status_of(admin, "InferenceService", name_of(index), namespace)
    want_type, want_status, want_reason = expected_condition(bad)
    found: dict[str, Any] = conditions(status).get(want_type) or {}
    if (found.get("status"), found.get("reason")) != (want_status, want_reason):
        return f"{want_type} is {found.get('status')}/{found.get('reason')}"
    if bad.text not in found.get("message", ""):
        return f"{want_type} says {found.get('message')!r}"
    if bad.severity == "error" and status.get("phase") != "Failed":
        return f"phase {status.get('phase')}"
    return None


async def test_every_bad_spec_is_told_once_and_nothing_spins(
    operator: RunningController, full_namespace: str
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    controller = operator.controllers.inference_services.controller
    log = reconcile_log(controller)
    admin.create(hf_model("cpu"), namespace=ns)
    admin.create(hf_model("gpu", hardware={"accelerator": "cuda", "gpu": {"count": 1}}), namespace=ns)
    for index, bad in enumerate(CORPUS):
        spec = {"modelRef": bad.model, "skipModelInit": True, **bad.spec}
        admin.create(
            {
                "apiVersion": API,
                "kind": "InferenceService",
                "metadata": {"name": name_of(index)},
                "spec": spec,
            },
            namespace=ns,
        )

    def pending() -> dict[str, str]:
        return {
            f"{name_of(i)} ({bad.case})": problem
            for i, bad in enumerate(CORPUS)
            if (problem := judged(admin, ns, i, bad)) is not None
        }

    try:
        await eventually(lambda: not pending(), within=120, what="every case reported")
    except TimeoutError as error:
        raise AssertionError(f"not as expected: {pending()}") from error

    # The Event says the same as the condition; an error applied nothing.
    await operator.manager.recorder.drain()
    reason = {"error": "InvalidSpec", "warning": "IgnoredSetting"}

    def told(index: int, bad: BadSpec, notes: dict[str, list[tuple[str, str, str]]]) -> bool:
        return any(
            (kind, why) == ("Warning", reason[bad.severity]) and note.startswith(bad.text)
            for kind, why, note in notes.get(name_of(index), [])
        )

    await eventually(
        lambda: all(told(i, bad, notes_by_service(admin, ns)) for i, bad in enumerate(CORPUS)),
        what="one Warning Event per case, with its text",
    )
    for index, bad in enumerate(CORPUS):
        if bad.severity == "error":
            assert admin.get_or_none("apps/v1", "Deployment", name_of(index), ns) is None, bad.case

    # No hot loop.
    await settled(controller)
    keys = [ObjectKey(ns, name_of(i)) for i in range(len(CORPUS))]
    before = {key: log(key) for key in keys}
    await asyncio.sleep(WINDOW)
    await worked_through(controller, ns)  # what came due in the window has been reconciled
    counts = {key.name: log(key) - before[key] for key in keys}
    errors = sum(bad.severity == "error" for bad in CORPUS)
    print(
        f"\nbad-spec corpus: {len(CORPUS)} cases ({errors} errors, {len(CORPUS) - errors} warnings), each "
        f"with its condition and Event; reconciles per service over {WINDOW:.0f} s once settled: max "
        f"{max(counts.values())}, total {sum(counts.values())}"
    )
    spinning = {name: count for name, count in counts.items() if count > MAX_RECONCILES}
    assert not spinning, f"reconciled more than {MAX_RECONCILES} times in {WINDOW:.0f} s: {spinning}"
