"""The semantically-bad corpus through the pure planner: every spec is refused (or warned about)
naming the InferenceService field and value, as the API server would word it, and an error applies
nothing (tests/bad_specs.py; the same corpus runs against the controller in tests/e2e)."""

import pytest
from bad_specs import CORPUS, BadSpec
from isvc_factories import gpu_model, live_deployment, make_isvc, make_model, observe
from isvc_planning import condition, plan


def test_the_corpus_is_large_and_its_cases_distinct() -> None:
    assert len(CORPUS) >= 40
    assert len({case.case for case in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("bad", CORPUS, ids=[bad.case for bad in CORPUS])
def test_each_bad_spec_is_reported_on_its_own_field(bad: BadSpec) -> None:
    model = gpu_model() if bad.model == "gpu" else make_model()
    live = live_deployment(ready=1)
    result = plan(isvc=make_isvc(bad.spec), model=model, observed=observe(deployment=live))
    messages = [event.message for event in result.events]
    if bad.severity == "error":
        assert result.status.phase == "Failed"
        degraded = condition(result, "Degraded")
        assert degraded is not None and degraded[:2] == ("True", "InvalidSpec")
        assert bad.text in degraded[2], degraded[2]
        invalid = [e for e in result.events if e.reason == "InvalidSpec"]
        assert invalid and all(e.type == "Warning" for e in invalid)
        assert any(e.message.startswith(bad.text) for e in invalid), messages
        # Nothing is applied or deleted: the running workload is left as it is.
        assert (result.deployment, result.service, result.hpa, result.deletes) == (None, None, None, ())
    else:
        assert result.status.phase != "Failed"
        spec_valid = condition(result, "SpecValid")
        assert spec_valid is not None and spec_valid[:2] == ("False", "IgnoredSettings")
        assert bad.text in spec_valid[2], spec_valid[2]
        assert any(e.reason == "IgnoredSetting" and e.message == bad.text for e in result.events), messages
        assert result.deployment is not None
