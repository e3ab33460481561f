"""The status writer's decision (pure, table-driven) and the body it applies."""

from typing import Any

import pytest

from llmkube.kube.status_writer import current_status, status_body, status_write_needed


def differs(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """Like the controllers' rule: anything but the timestamp is a change."""
    if old is None:
        return True
    return {k: v for k, v in old.items() if k != "at"} != {k: v for k, v in new.items() if k != "at"}


CREATING = {"phase": "Creating", "at": 1}
READY = {"phase": "Ready", "at": 2}
FAILED = {"phase": "Failed", "at": 3}


@pytest.mark.parametrize(
    ("cached", "cached_version", "last_write", "new", "write"),
    [
        (READY, "5", None, READY, False),  # nothing changed
        (READY, "5", None, {**READY, "at": 9}, False),  # only the timestamp moved
        (CREATING, "5", None, READY, True),  # a change, nothing written before
        (CREATING, "5", ("5", READY), READY, False),  # we wrote it; the cache has not caught up
        (CREATING, "5", ("5", READY), {**READY, "at": 9}, False),  # ...and planned it again later
        (CREATING, "5", ("5", READY), FAILED, True),  # a new change
        (CREATING, "6", ("5", READY), READY, True),  # the cache moved on (someone rewrote it): compare
        (
            CREATING,
            "5",
            ("5", READY),
            CREATING,
            True,
        ),  # back to what the stale cache shows: the API has READY
        (None, None, None, CREATING, True),
    ],
)
def test_status_write_needed(
    cached: dict[str, Any] | None,
    cached_version: str | None,
    last_write: tuple[str | None, dict[str, Any]] | None,
    new: dict[str, Any],
    write: bool,
) -> None:
    assert status_write_needed(cached, cached_version, last_write, new, differs) is write


@pytest.mark.parametrize(
    ("observed", "identity"),
    [
        (
            {"metadata": {"name": "a", "namespace": "ai", "uid": "u", "resourceVersion": "7"}},
            {"name": "a", "namespace": "ai"},
        ),
        ({"metadata": {"name": "cluster-wide"}}, {"name": "cluster-wide"}),
    ],
)
def test_status_body_keeps_only_the_identity(observed: dict[str, Any], identity: dict[str, Any]) -> None:
    assert status_body(observed, {"phase": "Ready"}) == {"metadata": identity, "status": {"phase": "Ready"}}


@pytest.mark.parametrize(
    ("cached", "cached_version", "last_write", "current"),
    [
        (CREATING, "5", None, CREATING),  # nothing written: the cache
        (CREATING, "5", ("5", READY), READY),  # the cache has not caught up with our write
        (FAILED, "6", ("5", READY), FAILED),  # it has moved on since: the cache
        (None, None, None, None),
    ],
)
def test_the_current_status_includes_our_own_last_write(
    cached: dict[str, Any] | None,
    cached_version: str | None,
    last_write: tuple[str | None, dict[str, Any]] | None,
    current: dict[str, Any] | None,
) -> None:
    assert current_status(cached, cached_version, last_write) == current
