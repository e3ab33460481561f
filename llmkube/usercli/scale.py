"""`llmkube scale NAME N` and `--min/--max` for autoscaled services.

An autoscaled service's replica count belongs to its HorizontalPodAutoscaler: setting it by hand
would be undone within seconds, so it is refused with the way to do what was meant. Scaling to 0
stops any service (the controller leaves a stopped one's HPA out), and from 0 it resumes.
"""

import argparse
from dataclasses import dataclass
from typing import Any

from llmkube.kube.errors import ApiError
from llmkube.kube.rest import MERGE_PATCH
from llmkube.kube.types import Obj
from llmkube.usercli.errors import UserError, explain
from llmkube.usercli.inspect import get_service
from llmkube.usercli.kinds import FIELD_MANAGER, INFERENCE_SERVICES
from llmkube.usercli.session import Session


@dataclass(frozen=True)
class ScaleChange:
    subresource: str | None  # "scale" for the replica count, None for spec.autoscaling
    patch: dict[str, Any]
    message: str


def plan_scale(
    isvc: Obj, replicas: int | None, min_replicas: int | None, max_replicas: int | None
) -> ScaleChange:
    """What to patch, or a UserError saying why not (pure)."""
    meta, spec = isvc.get("metadata") or {}, isvc.get("spec") or {}
    name = meta.get("name")
    autoscaling = spec.get("autoscaling")
    if min_replicas is not None or max_replicas is not None:
        if replicas is not None:
            raise UserError("give either a replica count or --min/--max, not both")
        if autoscaling is None:
            raise UserError(
                f'"{name}" is not autoscaled: --min/--max change spec.autoscaling, which it does not have '
                f"(set a fixed count with: llmkube scale {name} N)"
            )
        low = min_replicas if min_replicas is not None else autoscaling.get("minReplicas", 1)
        high = max_replicas if max_replicas is not None else autoscaling.get("maxReplicas")
        if isinstance(high, int) and low > high:
            raise UserError(f"--min {low} is more than --max {high}")
        bounds = {k: v for k, v in (("minReplicas", min_replicas), ("maxReplicas", max_replicas)) if v}
        return ScaleChange(None, {"spec": {"autoscaling": bounds}}, f"autoscaling between {low} and {high}")
    if replicas is None:
        raise UserError("give a replica count (llmkube scale NAME N) or --min/--max")
    if replicas < 0:
        raise UserError("the replica count cannot be negative")
    current = spec.get("replicas", 1)
    if autoscaling is not None and replicas > 0 and current != 0:
        low, high = autoscaling.get("minReplicas", 1), autoscaling.get("maxReplicas")
        raise UserError(
            f'"{name}" is autoscaled: its HorizontalPodAutoscaler owns the replica count '
            f"(between {low} and {high}), so a count set by hand would be undone. Change the bounds "
            f"with: llmkube scale {name} --min N --max M; or stop it with: llmkube scale {name} 0"
        )
    if replicas == 0:
        message = "stopped (0 replicas)"
    elif autoscaling is not None:
        message = "resumed; its HorizontalPodAutoscaler takes over the replica count"
    else:
        message = f"scaled to {replicas} replica{'s' if replicas != 1 else ''}"
    return ScaleChange("scale", {"spec": {"replicas": replicas}}, message)


async def run_scale(session: Session, args: argparse.Namespace) -> int:
    isvc = await get_service(session, args.name)
    change = plan_scale(isvc, args.replicas, args.min_replicas, args.max_replicas)
    try:
        await session.client.patch(
            INFERENCE_SERVICES,
            args.name,
            change.patch,
            session.namespace,
            patch_type=MERGE_PATCH,
            subresource=change.subresource,
            field_manager=FIELD_MANAGER,
        )
    except ApiError as error:
        raise explain(error, f'scaling "{args.name}"') from error
    print(f'"{args.name}" {change.message}')
    return 0
