"""The pods of a service and their serving container and port (pure choices over raw pods)."""

from collections.abc import Iterable, Sequence

from llmkube.api.constants import LABEL_SERVICE
from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.kube.errors import ApiError
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.deployment import PORT_NAME
from llmkube.plan.inferenceservice.runtimes import resolve_runtime, runtime_defaults
from llmkube.plan.inferenceservice.service import endpoint_port
from llmkube.usercli.errors import explain
from llmkube.usercli.kinds import PODS
from llmkube.usercli.session import Session


def service_selector(name: str) -> str:
    return f"{LABEL_SERVICE}={name}"


async def service_pods(session: Session, name: str) -> list[Obj]:
    try:
        pods = await session.client.list_all(PODS, session.namespace, label_selector=service_selector(name))
    except ApiError as error:
        raise explain(error, f'listing the pods of "{name}"') from error
    return sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))


def is_ready(pod: Obj) -> bool:
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def ready_pods(pods: Iterable[Obj]) -> list[Obj]:
    return [pod for pod in pods if is_ready(pod)]


def spec_of(isvc: Obj) -> InferenceServiceSpec | None:
    try:
        return InferenceServiceSpec.model_validate(isvc.get("spec") or {})
    except ValueError:
        return None


def serving_container(isvc: Obj) -> str:
    spec = spec_of(isvc)
    runtime = resolve_runtime(spec) if spec is not None else "llamacpp"
    return runtime_defaults(runtime).container_name


def serving_port(isvc: Obj, pod: Obj) -> int:
    """The container port named `http` (what the Service targets), else the endpoint's port."""
    containers: Sequence[Obj] = (pod.get("spec") or {}).get("containers") or []
    for container in containers:
        for port in container.get("ports") or []:
            if port.get("name") == PORT_NAME and isinstance(port.get("containerPort"), int):
                return int(port["containerPort"])
    spec = spec_of(isvc)
    return endpoint_port(spec) if spec is not None else 8080


def not_started(pod: Obj, container: str, *, previous: bool = False) -> str:
    """Why `container` of `pod` has no log to show yet ("" when it has one): the API server answers
    an unscheduled pod's log request with an empty 200, so this is decided from the pod's status
    (its PodScheduled condition, the container's state), never from the answer."""
    status = pod.get("status") or {}
    name = (pod.get("metadata") or {}).get("name")
    if not (pod.get("spec") or {}).get("nodeName"):
        conditions: list[Obj] = status.get("conditions") or []
        scheduled = next((c for c in conditions if c.get("type") == "PodScheduled"), {})
        why = scheduled.get("message") or scheduled.get("reason") or "waiting for the scheduler"
        return f'pod "{name}" is not on a node yet ({status.get("phase") or "Pending"}: {why})'
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    found = next((s for s in statuses if s.get("name") == container), None)
    if found is None:
        return f'pod "{name}" has not created container "{container}" yet'
    ran_before = bool((found.get("lastState") or {}).get("terminated"))
    if previous:
        return "" if ran_before else f'container "{container}" of pod "{name}" has no previous run'
    state = found.get("state") or {}
    if state.get("running") or state.get("terminated") or ran_before:
        return ""
    reason = (state.get("waiting") or {}).get("reason") or "waiting"
    return f'container "{container}" of pod "{name}" has not started yet ({reason})'
