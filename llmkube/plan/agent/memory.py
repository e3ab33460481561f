"""A host agent's memory: its budget, what a service needs, and when the host is under pressure.

The budget is `--memory-budget` (a quantity such as `24Gi`, or a fraction of the host's memory
such as `0.6` or `60%`), by default the reference agent's fraction: two thirds of a host with up to
36 GiB, three quarters of a larger one (the rest is the system's and the user's).

What a service needs is memory_fit's estimate of the model it loads (weights, KV cache for its
context and slots, compute buffers), read from the GGUF header of the very file the agent loads.
On unified memory (Metal) and without a GPU all of it is host memory; with a discrete GPU only
the part that stays on the host counts. A Model's `hardware.memoryBudget` (or `memoryFraction`
of the host's memory) caps what that model may take, and stands in for the estimate when the file
cannot be read before loading (a HuggingFace repo id the server fetches itself).
"""

import enum
from dataclasses import dataclass

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import GGUFMetadata, HardwareSpec, Model, ModelStatus
from llmkube.apimachinery.quantity import QuantityError, parse_quantity
from llmkube.plan.inferenceservice.memory_fit import GIB, MemoryEstimate, estimate_memory, size_text

#: the reference agent's default fractions, and the host size where the larger one starts
SMALL_HOST_FRACTION = 0.67
LARGE_HOST_FRACTION = 0.75
LARGE_HOST = 36 * GIB


def describe_bytes(num_bytes: float) -> str:
    return size_text(num_bytes)


def default_budget(total: int) -> int:
    fraction = SMALL_HOST_FRACTION if total <= LARGE_HOST else LARGE_HOST_FRACTION
    return int(total * fraction)


def parse_budget(text: str, total: int) -> int:
    """`--memory-budget`: `24Gi` (a quantity), `0.6` or `60%` (of `total`); empty: the default.
    Raises ValueError saying what is wrong."""
    text = text.strip()
    if not text:
        return default_budget(total)
    if text.endswith("%"):
        fraction = _number(text[:-1], text) / 100
    elif _is_plain_number(text) and float(text) <= 1:
        fraction = float(text)
    else:
        try:
            value = int(parse_quantity(text).value)
        except QuantityError as invalid:
            raise ValueError(
                f"{text!r} is neither a quantity (24Gi) nor a fraction (0.6, 60%): {invalid}"
            ) from None
        if value <= 0:
            raise ValueError(f"{text!r} is not a positive amount of memory")
        return value
    if not 0 < fraction <= 1:
        raise ValueError(f"{text!r} is not a fraction of the host's memory between 0 and 1 (or 100%)")
    return int(total * fraction)


def _is_plain_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _number(text: str, whole: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{whole!r} is not a percentage") from None


def model_cap(hardware: HardwareSpec | None, total: int) -> tuple[int | None, str]:
    """The most a Model lets its service take: hardware.memoryBudget, else memoryFraction of the
    host's memory; (None, "") when it says nothing. A budget that is no quantity is ignored here
    (the Model's own validation is the API server's)."""
    if hardware is None:
        return None, ""
    if hardware.memory_budget:
        try:
            value = int(parse_quantity(hardware.memory_budget).value)
        except QuantityError:
            value = 0
        if value > 0:
            return value, f"its Model's hardware.memoryBudget ({hardware.memory_budget})"
    if hardware.memory_fraction:
        return int(total * hardware.memory_fraction), (
            f"its Model's hardware.memoryFraction ({hardware.memory_fraction:g} of this host's "
            f"{describe_bytes(total)})"
        )
    return None, ""


@dataclass(frozen=True)
class Need:
    """What a service needs on this host (None: it cannot be told), and how that was found."""

    bytes: int | None
    source: str
    estimate: MemoryEstimate | None = None


def need_of(
    model: Model,
    spec: InferenceServiceSpec,
    gguf: GGUFMetadata | None,
    *,
    file_size: int | None,
    gpu_count: int,
    unified_memory: bool,
    total: int,
) -> Need:
    """The memory a service needs here, from the header of the file the agent loads (`gguf`), else
    its Model's cap. `unified_memory`: Metal (or no GPU): the GPU's share is host memory too."""
    cap, cap_source = model_cap(model.spec.hardware, total)
    if gguf is not None:
        status = (model.status or ModelStatus()).model_copy(
            update={"gguf": gguf, "source_content_length": file_size}
        )
        estimate = estimate_memory(model.model_copy(update={"status": status}), spec, gpu_count=gpu_count)
        if estimate is not None:
            needed = estimate.total if unified_memory else estimate.host_total
            return Need(needed, "memory_fit's estimate from the model's GGUF header", estimate)
    if cap is not None:
        return Need(cap, cap_source)
    return Need(None, "")


class Pressure(enum.Enum):
    NORMAL = "normal"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class PressureSettings:
    #: available memory below these fractions of the host's: warning, critical (the reference's)
    warning: float = 0.20
    critical: float = 0.10
    #: evict only when the agent's servers hold more than this share of the host's memory: pressure
    #: from other programs (a build, a browser) is not the servers' to pay for
    agent_share: float = 0.5


def pressure(available: int, total: int, settings: PressureSettings) -> Pressure:
    if total <= 0:
        return Pressure.NORMAL
    free = available / total
    if free < settings.critical:
        return Pressure.CRITICAL
    if free < settings.warning:
        return Pressure.WARNING
    return Pressure.NORMAL


def evicts_under_pressure(level: Pressure, servers_rss: int, total: int, settings: PressureSettings) -> bool:
    return level is Pressure.CRITICAL and total > 0 and servers_rss / total > settings.agent_share
