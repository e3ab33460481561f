"""The fault suite's control plane: a full tier of its own (its API server gets killed), with the
API server auditing the controller identity's requests (how writes are counted across SIGKILLs)."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_support import LONG, installed_cluster
from llmkube_testing.cluster import LocalCluster
from llmkube_testing.pytest_plugin import fresh_namespace

FAULTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The long variants (make fault-long) may take longer than the suite's 300 s per test.
    if LONG:
        for item in items:
            if FAULTS in Path(str(item.fspath)).parents and item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(1200))


@pytest.fixture(scope="session")
def fault_cluster() -> Iterator[LocalCluster]:
    if os.environ.get("LLMKUBE_TEST_KUBECONFIG") or os.environ.get("LLMKUBE_TEST_CLUSTER"):
        pytest.skip(
            "the fault suite kills control-plane processes: it needs a local control plane of its own"
        )
    yield from installed_cluster("full", audit=True)


@pytest.fixture
def fault_namespace(fault_cluster: LocalCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    yield from fresh_namespace(fault_cluster, request)
