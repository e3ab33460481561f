"""Never take over an object that something else controls.

A controller's cache of the kinds it owns is usually scoped by a label, so an object made by
someone else under a name we need is invisible to it, and a forced apply would silently take it
over (and later delete it). Before an apply that would create the object, ask the API server
whether it exists and who controls it.
"""

from __future__ import annotations

from collections.abc import Callable

from llmkube.kube.errors import AlreadyExists, NotFound
from llmkube.kube.resource import Resource
from llmkube.kube.rest import ApiClient
from llmkube.kube.types import Obj

__all__ = ["NotOurs", "refuse_foreign"]


class NotOurs(AlreadyExists):
    """An object with a name we need exists, and something else controls it."""

    def __init__(self, kind: str, namespace: str, name: str, owner: str) -> None:
        super().__init__(
            409,
            f"{kind} {namespace}/{name}: exists and is not controlled by this {owner}",
            reason="AlreadyExists",
        )


async def refuse_foreign(
    client: ApiClient, resource: Resource, desired: Obj, ours: Callable[[Obj], bool], owner: str
) -> Obj | None:
    """Raise :class:`NotOurs` when the object ``desired`` names exists and ``ours`` says we do not
    control it. Return None when it does not exist (the apply will create it), and the object when
    it is ours but was invisible to the cache (e.g. created by a predecessor without our label: the
    applier then adopts its fields). ``owner`` names the controlling kind in the message."""
    meta = desired.get("metadata") or {}
    try:
        existing = await client.get(resource, meta.get("name", ""), meta.get("namespace"))
    except NotFound:
        return None
    if not ours(existing):
        raise NotOurs(resource.kind, meta.get("namespace", ""), meta.get("name", ""), owner)
    return existing
