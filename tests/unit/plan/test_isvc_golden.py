"""Golden tests: complete plans compared with files written by hand from the reference text
(tests/unit/plan/golden/*.yaml). The downloader script is compared with its named constant, since
the reference describes it rather than quoting it."""

from pathlib import Path
from typing import Any

import pytest
import yaml
from isvc_factories import NOW

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import plan_inference_service
from llmkube.plan.inferenceservice.policy import SERVICE_TYPES
from llmkube.plan.model import download_scripts
from llmkube.plan.tenancy import TenancyPolicy

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*.yaml"))


def test_the_four_goldens_are_there() -> None:
    assert [p.stem for p in CASES] == ["cpu-default", "generic", "llamacpp-every-option", "vllm-multi-gpu"]


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden(path: Path) -> None:
    golden: dict[str, Any] = yaml.safe_load(path.read_text())
    isvc = InferenceService.model_validate(golden["input"]["isvc"])
    model = Model.model_validate(golden["input"]["model"])
    # Every option includes a LoadBalancer Service: allowed here as an admin would (plan/tenancy.py).
    config = OperatorConfig(tenancy=TenancyPolicy(allowed_service_types=frozenset(SERVICE_TYPES)))
    result = plan_inference_service(isvc, model, ObservedState(now=NOW), config)
    expected = golden["expected"]

    deployment = result.deployment
    assert deployment is not None
    for init in deployment["spec"]["template"]["spec"].get("initContainers", []):
        assert init["command"][2] == getattr(download_scripts, golden["script"])
        init["command"][2] = "<script>"
    assert deployment == expected["deployment"]
    assert result.service == expected["service"]
    assert result.hpa == expected["hpa"]
    assert result.cache_pvc == expected["cache_pvc"]

    status = result.status.to_json()
    assert status.pop("lastUpdated") == "2026-03-01T12:00:00Z"
    status["conditions"] = [
        {k: c[k] for k in ("type", "status", "reason", "message")} for c in status["conditions"]
    ]
    assert status == expected["status"]
    assert result.deletes == () and result.events == () and result.requeue_after is None
