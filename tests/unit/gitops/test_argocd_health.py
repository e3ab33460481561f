"""The Argo CD health checks, executed against status fixtures (tests/argocd_health_cases.py): one per
phase as the controller writes them, plus the cases a status can be in between (no status yet, an
older generation, a Ready condition that disagrees with the phase)."""

from typing import Any

import pytest
from argocd_health import health
from argocd_health_cases import ISVC_CASES, MODEL_CASES, QUOTA_CASES, ROUTER_CASES


@pytest.mark.parametrize(("case", "obj", "status", "message"), ISVC_CASES, ids=[c[0] for c in ISVC_CASES])
def test_inferenceservice_health(case: str, obj: dict[str, Any], status: str, message: str) -> None:
    found = health(obj)
    assert found.status == status, (case, found)
    assert message in found.message, (case, found)


@pytest.mark.parametrize(("case", "obj", "status", "message"), MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_model_health(case: str, obj: dict[str, Any], status: str, message: str) -> None:
    found = health(obj)
    assert found.status == status, (case, found)
    assert message in found.message, (case, found)


@pytest.mark.parametrize(("case", "obj", "status", "message"), QUOTA_CASES, ids=[c[0] for c in QUOTA_CASES])
def test_gpuquota_health(case: str, obj: dict[str, Any], status: str, message: str) -> None:
    found = health(obj)
    assert found.status == status, (case, found)
    assert message in found.message, (case, found)


@pytest.mark.parametrize(("case", "obj", "status", "message"), ROUTER_CASES, ids=[c[0] for c in ROUTER_CASES])
def test_modelrouter_health(case: str, obj: dict[str, Any], status: str, message: str) -> None:
    found = health(obj)
    assert found.status == status, (case, found)
    assert message in found.message, (case, found)
