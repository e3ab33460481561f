"""A failed write of one of our objects, told in the terms of the InferenceService (the safety net
for refusals the planner did not foresee, and the Event text)."""

from isvc_factories import make_isvc
from isvc_planning import plan

from llmkube.plan.inferenceservice.write_failures import RefusedField, write_failure

SPEC = {"env": [{"name": "A=B", "value": "1"}], "tolerations": [{"key": "k", "operator": "Exists"}]}


def test_a_refusal_of_the_users_values_is_an_invalid_spec_naming_their_fields() -> None:
    isvc = make_isvc({"runtimeClassName": "nvidia"})
    sent = plan(isvc=isvc).deployment
    failure = write_failure(
        "Deployment",
        isvc.spec,
        sent,
        code=422,
        api_reason="Invalid",
        api_message='Deployment.apps "demo" is invalid: ...',
        causes=[
            RefusedField("spec.template.spec.runtimeClassName", 'Invalid value: "nvidia": no such class')
        ],
    )
    assert (failure.reason, failure.event_reason) == ("InvalidSpec", "InvalidSpec")
    assert failure.message == (
        'the API server refused the Deployment: spec.runtimeClassName: Invalid value: "nvidia": no such class'
    )


def test_a_refusal_of_a_field_of_ours_says_so_and_is_not_blamed_on_the_user() -> None:
    isvc = make_isvc({})
    failure = write_failure(
        "Deployment",
        isvc.spec,
        plan(isvc=isvc).deployment,
        code=422,
        api_reason="Invalid",
        api_message="...",
        causes=[
            RefusedField("spec.template.spec.volumes[0].name", "Duplicate value"),
            RefusedField("spec.template.spec.nodeSelector", 'Invalid value: "x"'),
        ],
    )
    assert (failure.reason, failure.event_reason) == ("Failed", "WriteFailed")
    assert failure.message == (
        "the API server refused the Deployment: Deployment spec.template.spec.volumes[0].name "
        '(set by the controller): Duplicate value; spec.nodeSelector: Invalid value: "x"'
    )


def test_a_refusal_without_fields_quotes_the_server() -> None:
    failure = write_failure(
        "Deployment",
        make_isvc({}).spec,
        None,
        code=422,
        api_reason="Invalid",
        api_message="ValidatingAdmissionPolicy 'p' denied request: run in gVisor",
        causes=[RefusedField("", "ValidatingAdmissionPolicy 'p' denied request: run in gVisor")],
    )
    assert (failure.reason, failure.event_reason) == ("Failed", "WriteFailed")
    assert failure.message == (
        "the API server refused the Deployment: 422 Invalid: "
        "ValidatingAdmissionPolicy 'p' denied request: run in gVisor"
    )


def test_other_failures() -> None:
    spec = make_isvc({}).spec
    quota = write_failure(
        "Service", spec, None, code=403, api_reason="Forbidden", api_message="exceeded quota"
    )
    assert quota.message == "the API server refused the Service: 403 Forbidden: exceeded quota"
    busy = write_failure("HorizontalPodAutoscaler", spec, None, code=503, api_reason="", api_message="busy")
    assert busy.message == "writing the HorizontalPodAutoscaler failed: 503: busy"
    assert busy.reason == quota.reason == "Failed"
