"""What parsing a request body costs, known before it is parsed, and how deep a parsed one goes.

orjson turns each JSON value into a Python object: `[]` (2 bytes and a comma) becomes a list of 56
bytes and a pointer, so an 8 MiB body of `[[],[],...]` parses into ~200 MiB and takes a second of
the event loop (most of it the garbage collector looking at 2.8 million new lists). A body's parsed
size follows from its structural bytes, counted at C speed (`bytes.count`) before parsing: every
value but the first of a container follows a `,`, every object member a `:`, every container opens
with `[` or `{`. `parse_cost` charges each the most its kind of value was measured to cost
(bench/bench_router_bodies.py: peak RSS over the body's size for lists, dicts, short strings,
numbers and nesting), so it is an upper bound of what parsing takes, counting structural bytes
inside strings too (they cost nothing when parsed: the bound is loose there, never short).

A body may cost at most `PARSE_FACTOR` times its size, or `PARSE_FLOOR` whatever its size (a body
of ordinary JSON and prose costs about its size; a dense one small enough is cheap in absolute
terms); more is refused before parsing (413). What is admitted is held against the router's body
budget for as long as the request lasts (llmkube.router.http.budget).

A parsed body is nested at most `MAX_DEPTH` deep (orjson itself stops at 1,024; the router writes
bodies back with orjson, which stops at 254, and walks them): `depth_over` finds out without
recursion, in time proportional to the values."""

from typing import Any

#: bytes of memory, at most, per structural byte of each kind (measured, with a margin)
CONTAINER_COST = 80
VALUE_COST = 96
MEMBER_COST = 128
#: a body costs at most this many times its size ...
PARSE_FACTOR = 12
#: ... or this much, whatever its size
PARSE_FLOOR = 32 << 20
MAX_DEPTH = 128


def parse_cost(raw: bytes) -> int:
    """An upper bound of the memory parsing `raw` takes (bytes), from its structural bytes."""
    containers = raw.count(b"[") + raw.count(b"{")
    return (
        len(raw) + CONTAINER_COST * containers + VALUE_COST * raw.count(b",") + MEMBER_COST * raw.count(b":")
    )


def parse_allowance(size: int) -> int:
    """The most a body of `size` bytes may cost to parse."""
    return max(PARSE_FLOOR, PARSE_FACTOR * size)


def depth_over(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed JSON value nests deeper than `limit` (the top level is depth 1)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False
