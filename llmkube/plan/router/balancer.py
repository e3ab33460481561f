"""Which pod of an InferenceService gets a request: the fewest requests in flight, except that a
request whose prompt starts like earlier ones goes to the same pod (rendezvous hashing of the
prompt's first bytes) while that pod is not overloaded, so llama.cpp's prompt cache is reused.

*Overloaded* means `AFFINITY_SLACK` or more requests in flight beyond the least busy pod. Rendezvous
hashing keeps the mapping stable when pods come and go: only the prompts of a removed pod move."""

import hashlib
from collections.abc import Collection, Mapping

#: how much busier than the least busy pod the preferred pod may be and still be chosen
AFFINITY_SLACK = 2
#: the prompt's first characters that choose the preferred pod (a system prompt, a conversation's start)
AFFINITY_PREFIX = 256


def _score(key: bytes, endpoint: str) -> bytes:
    return hashlib.blake2b(key + b"\x00" + endpoint.encode(), digest_size=8).digest()


def preferred(endpoints: Collection[str], key: bytes) -> str:
    return max(endpoints, key=lambda endpoint: _score(key, endpoint))


def choose(
    endpoints: Collection[str],
    in_flight: Mapping[str, int],
    *,
    key: bytes | None,
    turn: int = 0,
) -> str | None:
    """The endpoint for one request among `endpoints` (those left to try), or None when empty.
    `turn` breaks ties between equally busy pods when there is no key (round robin)."""
    if len(endpoints) <= 1:
        return next(iter(endpoints), None)
    least = min(in_flight.get(e, 0) for e in endpoints)
    if key:
        target = preferred(endpoints, key)
        if in_flight.get(target, 0) < least + AFFINITY_SLACK:
            return target
    idle = sorted(e for e in endpoints if in_flight.get(e, 0) == least)
    return idle[turn % len(idle)]
