"""`-w/--watch`: the changes to a list of objects, from a WATCH that is reopened when the server
ends it, and re-listed when the server says the version is too old (410 Expired), as kubectl does."""

from collections.abc import AsyncIterator

import orjson

from llmkube.kube.errors import ApiError, Expired, error_from_status
from llmkube.kube.resource import Resource
from llmkube.kube.types import Obj
from llmkube.usercli.errors import explain
from llmkube.usercli.session import Session

#: How long one WATCH request lasts before the server ends it and it is opened again.
WATCH_SECONDS = 300


async def list_with_version(
    session: Session,
    resource: Resource,
    namespace: str | None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> tuple[list[Obj], str]:
    """Every object and the list's resourceVersion (where a watch of the changes starts)."""
    items: list[Obj] = []
    token: str | None = None
    version = ""
    try:
        while True:
            page = await session.client.list_page(
                resource,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=500,
                continue_token=token,
            )
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            token = meta.get("continue") or None
            if not token:
                return items, version
    except ApiError as error:
        raise explain(error, f"listing {resource.plural}") from error


async def changes(
    session: Session,
    resource: Resource,
    namespace: str | None,
    version: str,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
) -> AsyncIterator[tuple[str, Obj]]:
    """(ADDED | MODIFIED | DELETED, object) for every change after `version`, for ever. After a
    410 the objects are listed again and each is yielded as MODIFIED (what changed meanwhile)."""
    while True:
        try:
            async with session.client.watch(
                resource,
                namespace,
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
                label_selector=label_selector,
                field_selector=field_selector,
                read_timeout=None,  # a quiet list may send nothing for minutes; the server ends it
            ) as response:
                pending = b""
                async for chunk in response.iter_chunks():
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for line in lines:
                        if not line.strip():
                            continue
                        event = orjson.loads(line)
                        kind, obj = str(event.get("type") or ""), event.get("object") or {}
                        if kind == "ERROR":  # a Status: 410 Expired when the version is too old
                            raise error_from_status(int(obj.get("code") or 500), obj)
                        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                        if kind in ("ADDED", "MODIFIED", "DELETED"):
                            yield kind, obj
        except Expired:
            items, version = await list_with_version(
                session, resource, namespace, label_selector=label_selector, field_selector=field_selector
            )
            for obj in items:
                yield "MODIFIED", obj
        except ApiError as error:
            raise explain(error, f"watching {resource.plural}") from error
