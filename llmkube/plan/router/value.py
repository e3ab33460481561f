"""`@value`: the router's per-request values (an admission, an outcome, an audit record), immutable
as far as the type checker sees (a dataclass that is frozen by default) and plain slotted
dataclasses at run time: a frozen dataclass's `__init__` sets each field through
`object.__setattr__`, about 0.6 µs a field on Python 3.11 where a slotted one costs a few tens of
ns, and a request makes several of them (bench/bench_router.py measures the CPU per request)."""

from dataclasses import dataclass
from typing import TypeVar, dataclass_transform

T = TypeVar("T")


@dataclass_transform(frozen_default=True)
def value(cls: type[T]) -> type[T]:
    # Hashable as a frozen one is (a value may be a field's default).
    return dataclass(slots=True, unsafe_hash=True)(cls)
