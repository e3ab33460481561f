"""`llmkube deploy`'s memory-fit check: the controller's own estimate (plan.memory_fit), made
before the InferenceService is created, from the Model's GGUF metadata once the controller has
read it."""

import asyncio
import time
from dataclasses import dataclass

from pydantic import ValidationError
from rich.console import Console

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import Model
from llmkube.kube.errors import ApiError
from llmkube.kube.types import Obj
from llmkube.plan.inferenceservice.config import OperatorConfig
from llmkube.plan.inferenceservice.gpu import effective_gpu_count, gpu_resource_name
from llmkube.plan.inferenceservice.memory_fit import FitVerdict, enforced, judge_memory_fit, node_gpu_memory
from llmkube.plan.inferenceservice.runtimes import resolve_runtime
from llmkube.usercli.kinds import MODELS, NODES
from llmkube.usercli.session import Session

# Model phases after which waiting longer brings no header: it was read, or it will not be.
_SETTLED = ("Ready", "Failed")


@dataclass(frozen=True)
class FitCheck:
    verdict: FitVerdict | None
    note: str  # why there is no verdict, when there is none


async def _model_with_metadata(session: Session, name: str, within: float) -> tuple[Model | None, str]:
    deadline = time.monotonic() + within
    phase = "Pending"
    while True:
        try:
            raw = await session.client.get(MODELS, name, session.namespace)
            model = Model.model_validate(raw)
        except (ApiError, ValidationError) as error:
            return None, f"the Model could not be read ({error})"
        status = model.status
        phase = (status.phase if status else None) or "Pending"
        if status is not None and status.gguf is not None and status.gguf.layer_count:
            return model, ""
        if phase in _SETTLED or time.monotonic() >= deadline:
            break
        await asyncio.sleep(1.0)
    return model, f"the Model is {phase} and its status has no GGUF metadata yet"


async def _node_gpu_memory(session: Session, model: Model) -> tuple[int, ...]:
    try:
        nodes = await session.client.list_all(NODES)
    except ApiError:
        return ()  # reading nodes is a courtesy: users often may not
    return node_gpu_memory(nodes, gpu_resource_name(model, OperatorConfig()))


async def check_memory_fit(session: Session, model_name: str, isvc: Obj, *, within: float) -> FitCheck:
    model, note = await _model_with_metadata(session, model_name, within)
    if model is None or note:
        return FitCheck(None, note)
    spec = InferenceServiceSpec.model_validate(isvc["spec"])
    verdict = judge_memory_fit(
        model,
        spec,
        runtime=resolve_runtime(spec),
        gpu_count=effective_gpu_count(spec, model),
        node_gpu_memory=await _node_gpu_memory(session, model),
    )
    if verdict is None:
        return FitCheck(None, f'runtime "{resolve_runtime(spec)}" sizes its memory itself')
    return FitCheck(verdict, "")


def report(console: Console, check: FitCheck, isvc: Obj) -> bool:
    """Print the check; True when deploying should stop (a misfit and the enforce annotation)."""
    verdict = check.verdict
    if verdict is None:
        console.print(
            f"[dim]Memory fit: not checked ({check.note}); see the MemoryFit condition later.[/dim]"
        )
        return False
    if verdict.status == "True":
        console.print(f"[green]Memory fit:[/green] {verdict.message}")
        return False
    if verdict.status == "Unknown":
        console.print(f"[yellow]Memory fit unknown:[/yellow] {verdict.message}")
        return False
    console.print(f"[bold yellow]Warning: it may not fit ({verdict.reason}):[/bold yellow] {verdict.message}")
    if enforced((isvc.get("metadata") or {}).get("annotations")):
        console.print("[bold red]Not created: the memory-fit annotation says enforce.[/bold red]")
        return True
    console.print("[dim]Creating it anyway (estimates can be wrong; --enforce-memory-fit refuses).[/dim]")
    return False
