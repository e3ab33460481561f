"""The objects a plan would apply, checked as the API server will check them, before anything is
sent: each problem is an error on the InferenceService field the value came from (the service is
Failed with Degraded=True/InvalidSpec, and nothing is applied), never a write the server refuses and
the controller retries forever."""

from llmkube.api.base import KubeObject
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.plan.apiserver.pod_template_rules import pod_template_errors
from llmkube.plan.inferenceservice.field_origins import describe
from llmkube.plan.inferenceservice.validation import Issue


def object_issues(spec: InferenceServiceSpec, deployment: KubeObject | None) -> list[Issue]:
    if deployment is None:
        return []
    template = (deployment.get("spec") or {}).get("template") or {}
    return [
        Issue(describe("Deployment", error.path, spec, deployment), error.message, "error")
        for error in pod_template_errors(template)
    ]
