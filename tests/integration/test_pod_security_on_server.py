"""The Pod Security port (llmkube/plan/apiserver/pod_security.py) agrees with the API server's own PodSecurity
admission: every case of tests/pod_security_cases.py, and the pods the planner builds by default,
are created (dry run) in namespaces that enforce baseline and restricted; the server admits
exactly the pods the port says meet the level, and names the same rules when it refuses."""

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from llmkube_testing.pytest_plugin import ClusterHandle
from llmkube_testing.rest import KubeRest, RestError
from pod_security_cases import CASES, RESTRICTED_POD, template_with

from llmkube.api.inferenceservice import InferenceService
from llmkube.api.model import Model
from llmkube.plan.apiserver.pod_security import Level, violations
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.observed import ObservedState
from llmkube.plan.inferenceservice.planner import plan_inference_service
from llmkube.plan.inferenceservice.priority import priority_classes
from llmkube.plan.model.source import cache_key

_REFUSED = re.compile(r'violates PodSecurity "(?:baseline|restricted):latest": (.*)$', re.DOTALL)


@pytest.fixture(scope="module")
def enforcing(api_cluster: ClusterHandle) -> Iterator[dict[Level, str]]:
    admin = api_cluster.admin()
    names: dict[Level, str] = {}
    for level in ("baseline", "restricted"):
        name = f"pss-{level}"
        admin.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"pod-security.kubernetes.io/enforce": level}},
            }
        )
        names[level] = name  # type: ignore[index]
    yield names
    for name in names.values():
        admin.delete("v1", "Namespace", name)


def server_verdict(admin: KubeRest, namespace: str, template: dict[str, Any]) -> set[str] | None:
    """None when the server admits the pod (dry run), else the rule names of its refusal."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "case", **template["metadata"]}}
    pod["spec"] = template["spec"]
    try:
        admin.request("POST", f"/api/v1/namespaces/{namespace}/pods?dryRun=All", pod)
    except RestError as refused:
        assert refused.status == 403, f"not a PodSecurity refusal: {refused}"
        message = str(refused.body.get("message") if isinstance(refused.body, dict) else refused.body)
        found = _REFUSED.search(message)
        assert found, message
        # "reason (detail), reason (detail)": the reasons are what the port names each violation.
        return {part.split(" (")[0].strip() for part in re.split(r"\), (?=[^()]*\()", found.group(1))}
    return None


def ours(template: dict[str, Any], level: Level) -> set[str] | None:
    found = violations(template, level, prefix="")
    return {v.reason for v in found} or None


@pytest.mark.parametrize(("name", "change", "_b", "_r"), CASES, ids=[c[0] for c in CASES])
def test_the_server_and_the_port_agree(
    api_cluster: ClusterHandle,
    enforcing: dict[Level, str],
    name: str,
    change: dict[str, Any],
    _b: set[str],
    _r: set[str],
) -> None:
    admin = api_cluster.admin()
    template = template_with(change)
    for level, namespace in enforcing.items():
        assert server_verdict(admin, namespace, template) == ours(template, level), (name, level)


def test_the_reference_pod_is_admitted_everywhere(
    api_cluster: ClusterHandle, enforcing: dict[Level, str]
) -> None:
    admin = api_cluster.admin()
    for namespace in enforcing.values():
        assert server_verdict(admin, namespace, RESTRICTED_POD) is None


@pytest.mark.parametrize(
    ("runtime", "admitted"),
    [("llamacpp", True), ("vllm", True), ("tgi", True), ("generic", False)],
)
def test_the_planners_default_pods_meet_restricted_where_we_know_the_image(
    api_cluster: ClusterHandle, enforcing: dict[Level, str], runtime: str, admitted: bool
) -> None:
    """A default service of each runtime whose image we ship is admitted where Pod Security is
    "restricted"; an image we do not know keeps the user it was built for, which restricted
    refuses unless the spec says non-root (and the port says so before anything is sent)."""
    spec: dict[str, Any] = {"modelRef": "tiny", "runtime": runtime}
    if runtime == "generic":
        spec["image"] = "registry.local/any:1"
    isvc = InferenceService.model_validate(
        {"metadata": {"name": "svc", "namespace": "ns", "uid": "u", "generation": 1}, "spec": spec}
    )
    model = Model.model_validate(
        {
            "metadata": {"name": "tiny", "namespace": "ns", "generation": 1},
            "spec": {"source": "https://models.local/tiny.gguf"},
            "status": {
                "phase": "Ready",
                "cacheKey": cache_key("https://models.local/tiny.gguf"),
                "observedGeneration": 1,
            },
        }
    )
    plan = plan_inference_service(isvc, model, ObservedState(now=datetime.now(UTC)), OperatorConfig())
    assert plan.deployment is not None, plan.status
    template = plan.deployment["spec"]["template"]
    # The Priority admission plugin needs the class to exist; the controller ensures ours in a cluster.
    api_cluster.admin().apply_all(priority_classes())
    verdict = server_verdict(api_cluster.admin(), enforcing["restricted"], template)
    assert (verdict is None) is admitted
    assert verdict == ours(template, "restricted")
