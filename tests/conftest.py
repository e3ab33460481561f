"""Shared fixtures: real local control planes (see llmkube_testing/pytest_plugin.py)."""

from pathlib import Path

import pytest

pytest_plugins = ["llmkube_testing.pytest_plugin"]

TESTS = Path(__file__).parent

#: What needs `make tools` (release tools, Prometheus, MinIO) and what needs `make node-prereqs`
#: (the node tier): `make test` runs everything else while those build, then each group once its
#: build is done (hack/test.sh). A module elsewhere marks itself (`pytestmark`): the node tier's
#: modules that drive helm, Prometheus or MinIO are marked `tools` too.
NEEDS_TOOLS = [TESTS / "monitoring", TESTS / "gitops", TESTS / "e2e" / "install", TESTS / "release"]
NEEDS_NODE_PREREQS = [TESTS / "node"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Mark by directory so `-m "not e2e"` works without decorating every test.
    for item in items:
        path = Path(str(item.fspath))
        if any(directory in path.parents for directory in NEEDS_TOOLS):
            item.add_marker(pytest.mark.tools)
        if any(directory in path.parents for directory in NEEDS_NODE_PREREQS):
            item.add_marker(pytest.mark.node_prereqs)
        if TESTS / "integration" in path.parents:
            item.add_marker(pytest.mark.integration)
        elif TESTS / "e2e" in path.parents:
            item.add_marker(pytest.mark.e2e)
        elif TESTS / "faults" in path.parents:
            item.add_marker(pytest.mark.faults)
        elif TESTS / "node" in path.parents:
            item.add_marker(pytest.mark.node)
