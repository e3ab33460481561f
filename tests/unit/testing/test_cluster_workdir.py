"""What a local cluster's temporary directory becomes when it stops (llmkube_testing/cluster.py)."""

import pytest
from llmkube_testing.cluster import KEEP_ENV, keep_requested, workdir_disposal


@pytest.mark.parametrize(
    ("failed", "keep", "removed"),
    [
        (False, False, (".",)),  # a clean stop: nothing is left behind
        (True, False, ("etcd",)),  # a failed run: the logs stay, the etcd data (most of it) goes
        (False, True, ()),  # asked to keep it: all of it
        (True, True, ()),
    ],
)
def test_what_a_stop_removes(failed: bool, keep: bool, removed: tuple[str, ...]) -> None:
    assert workdir_disposal(failed=failed, keep=keep) == removed


@pytest.mark.parametrize(
    ("environ", "keep"),
    [
        ({}, False),
        ({KEEP_ENV: ""}, False),
        ({KEEP_ENV: "0"}, False),
        ({KEEP_ENV: "1"}, True),
        ({KEEP_ENV: "yes"}, True),
    ],
)
def test_the_environment_asks_to_keep_the_directory(environ: dict[str, str], keep: bool) -> None:
    assert keep_requested(environ) is keep
