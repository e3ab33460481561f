"""An in-memory API server speaking through the client's Transport protocol (unit tests only;
everything that claims to work with Kubernetes is proven against a real kube-apiserver in
tests/integration/kube)."""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from llmkube.kube.clock import Clock
from llmkube.kube.rest import ApiClient, RequestTimeout, TransportError


@dataclass
class Request:
    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class Reply:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: for watches: a queue of raw chunks (None ends the stream)
    stream: asyncio.Queue[bytes | None] | None = None


class FakeResponse:
    def __init__(self, reply: Reply) -> None:
        self._reply = reply

    @property
    def status(self) -> int:
        return self._reply.status

    @property
    def headers(self) -> Mapping[str, str]:
        return self._reply.headers

    async def read(self) -> bytes:
        body = self._reply.body
        if body is None:
            return b""
        return body if isinstance(body, bytes) else orjson.dumps(body)

    async def iter_chunks(self) -> AsyncIterator[bytes]:
        assert self._reply.stream is not None
        while (chunk := await self._reply.stream.get()) is not None:
            if isinstance(chunk, BaseException):
                raise chunk
            yield chunk


def status_body(code: int, reason: str, message: str = "", **details: Any) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message or reason,
        "details": details,
    }


Fault = Callable[[Request], Reply | BaseException | None]


class FakeApiServer:
    """ConfigMaps only (any namespace), with resourceVersions, paging, watches, bookmarks and
    compaction.  ``faults`` are consulted first, in order: each returns a Reply / exception to
    answer the request with (and is then consumed), or None to let it through."""

    def __init__(self) -> None:
        self.rv = 100
        self.objects: dict[tuple[str, str], dict[str, Any]] = {}
        self.history: list[tuple[int, str, dict[str, Any]]] = []
        self.compacted_rv = 0
        self.lists_expire = False
        self.requests: list[Request] = []
        self.faults: deque[Fault] = deque()
        self._watches: list[tuple[str | None, asyncio.Queue[bytes | None]]] = []
        self._uid = 0

    # -- test-side mutations --------------------------------------------------------------------

    def _bump(self) -> str:
        self.rv += 1
        return str(self.rv)

    def put(
        self, namespace: str, name: str, data: dict[str, str] | None = None, **meta: Any
    ) -> dict[str, Any]:
        key = (namespace, name)
        existing = self.objects.get(key)
        if existing is None:
            self._uid += 1
            obj = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{self._uid}", **meta},
                "data": data or {},
            }
            event = "ADDED"
        else:
            obj = copy.deepcopy(existing)
            obj["metadata"].update(meta)
            obj["data"] = data or {}
            event = "MODIFIED"
        obj["metadata"]["resourceVersion"] = self._bump()
        self.objects[key] = obj
        self._record(event, obj)
        return obj

    def remove(self, namespace: str, name: str) -> None:
        obj = self.objects.pop((namespace, name))
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = self._bump()
        self._record("DELETED", obj)

    def bookmark(self) -> None:
        line = orjson.dumps(
            {
                "type": "BOOKMARK",
                "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": str(self.rv)}},
            }
        )
        for _, queue in self._watches:
            queue.put_nowait(line + b"\n")

    def compact(self, *, lists_too: bool = False) -> None:
        """Forget history: watches from an older RV now get 410.  A real apiserver serves a LIST at
        an old RV from its watch cache; ``lists_too`` makes such LISTs expire as well."""
        self.compacted_rv = self.rv
        self.lists_expire = lists_too

    def end_watches(self) -> None:
        for _, queue in self._watches:
            queue.put_nowait(None)
        self._watches.clear()

    def send_raw(self, chunk: bytes | BaseException) -> None:
        for _, queue in self._watches:
            queue.put_nowait(chunk)  # type: ignore[arg-type]

    @property
    def open_watches(self) -> int:
        return len(self._watches)

    def _record(self, event: str, obj: dict[str, Any]) -> None:
        self.history.append((self.rv, event, copy.deepcopy(obj)))
        line = orjson.dumps({"type": event, "object": obj}) + b"\n"
        for namespace, queue in self._watches:
            if namespace in (None, obj["metadata"]["namespace"]):
                queue.put_nowait(line)

    # -- Transport ------------------------------------------------------------------------------

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str],
        body: bytes | None,
        request_timeout: RequestTimeout,
    ) -> Any:
        parts = urlsplit(url)
        params = {name: values[-1] for name, values in parse_qs(parts.query, keep_blank_values=True).items()}
        request = Request(method, parts.path, params, dict(headers), orjson.loads(body) if body else None)
        self.requests.append(request)
        return self._respond(request)

    async def close(self) -> None:
        return None

    @asynccontextmanager
    async def _respond(self, request: Request) -> AsyncIterator[FakeResponse]:
        for fault in list(self.faults):
            outcome = fault(request)
            if outcome is None:
                continue
            self.faults.remove(fault)
            if isinstance(outcome, BaseException):
                raise outcome
            yield FakeResponse(outcome)
            return
        yield FakeResponse(self._handle(request))

    def _handle(self, request: Request) -> Reply:
        segments = request.path.strip("/").split("/")
        namespace = segments[3] if len(segments) > 3 and segments[2] == "namespaces" else None
        if request.method != "GET" or segments[-1] != "configmaps":
            return Reply(405, status_body(405, "MethodNotAllowed"))
        if request.params.get("watch") == "true":
            return self._watch(namespace, request.params)
        return self._list(namespace, request.params)

    def _list(self, namespace: str | None, params: dict[str, str]) -> Reply:
        rv = params.get("resourceVersion")
        if self.lists_expire and rv not in (None, "", "0") and int(rv) < self.compacted_rv:
            return Reply(410, status_body(410, "Expired", f"too old resource version: {rv}"))
        items = sorted(
            (obj for (ns, _), obj in self.objects.items() if namespace in (None, ns)),
            key=lambda obj: (obj["metadata"]["namespace"], obj["metadata"]["name"]),
        )
        start = 0
        list_rv = str(self.rv)
        if token := params.get("continue"):
            start_text, _, list_rv = token.partition(":")
            if int(list_rv) < self.compacted_rv:
                return Reply(410, status_body(410, "Expired", "continue token expired"))
            start = int(start_text)
        limit = int(params.get("limit") or 0)
        page = items[start : start + limit] if limit else items[start:]
        meta: dict[str, Any] = {"resourceVersion": list_rv}
        if limit and start + limit < len(items):
            meta["continue"] = f"{start + limit}:{list_rv}"
        listed = [
            {k: v for k, v in copy.deepcopy(obj).items() if k not in ("apiVersion", "kind")} for obj in page
        ]
        return Reply(200, {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": meta, "items": listed})

    def _watch(self, namespace: str | None, params: dict[str, str]) -> Reply:
        rv = int(params.get("resourceVersion") or 0)
        queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        if rv and rv < self.compacted_rv:
            gone = status_body(410, "Expired", f"too old resource version: {rv} ({self.compacted_rv})")
            queue.put_nowait(orjson.dumps({"type": "ERROR", "object": gone}) + b"\n")
            queue.put_nowait(None)
            return Reply(200, stream=queue)
        for event_rv, event, obj in self.history:
            if event_rv > rv and namespace in (None, obj["metadata"]["namespace"]):
                queue.put_nowait(orjson.dumps({"type": event, "object": obj}) + b"\n")
        self._watches.append((namespace, queue))
        return Reply(200, stream=queue)


def fail_once(
    status: int | None = None,
    *,
    reason: str = "",
    when: Callable[[Request], bool] = lambda request: True,
    headers: dict[str, str] | None = None,
    exception: BaseException | None = None,
) -> Fault:
    def fault(request: Request) -> Reply | BaseException | None:
        if not when(request):
            return None
        if exception is not None:
            return exception
        assert status is not None
        return Reply(status, status_body(status, reason or str(status)), headers or {})

    return fault


def is_watch(request: Request) -> bool:
    return request.params.get("watch") == "true"


def is_list(request: Request) -> bool:
    return request.method == "GET" and request.params.get("watch") != "true"


@dataclass
class RecordingTransport:
    replies: list[Reply]
    seen: list[tuple[str, str, dict[str, str], bytes | None]] = field(default_factory=list)

    def send(self, method: str, url: str, *, headers: Any, body: bytes | None, request_timeout: Any) -> Any:
        self.seen.append((method, url, dict(headers), body))
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply

        class _Context:
            async def __aenter__(self) -> FakeResponse:
                return FakeResponse(reply)

            async def __aexit__(self, *args: object) -> None:
                return None

        return _Context()

    async def close(self) -> None:
        return None


def make_client(server: FakeApiServer, clock: Clock) -> ApiClient:
    return ApiClient("https://fake.example:6443", transport=server, clock=clock)


CONNECTION_REFUSED = TransportError("connection refused")


class FakeLeaseServer:
    """Leases only: GET / POST / PUT with resourceVersion conflicts, shared by several clients."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.rv = 1
        self.writes: list[tuple[str, dict[str, Any]]] = []

    def view(self) -> LeaseView:
        return LeaseView(self)

    def handle(self, method: str, path: str, body: Any) -> Reply:
        segments = path.strip("/").split("/")  # apis/coordination.k8s.io/v1/namespaces/<ns>/leases[/<name>]
        namespace = segments[4]
        if method == "POST":
            key = (namespace, body["metadata"]["name"])
            if key in self.leases:
                return Reply(409, status_body(409, "AlreadyExists"))
            return self._store(key, body, 201)
        key = (namespace, segments[6])
        if method == "GET":
            if key not in self.leases:
                return Reply(404, status_body(404, "NotFound"))
            return Reply(200, copy.deepcopy(self.leases[key]))
        if method == "PUT":
            current = self.leases.get(key)
            if current is None:
                return Reply(404, status_body(404, "NotFound"))
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return Reply(409, status_body(409, "Conflict", "the object has been modified"))
            return self._store(key, body, 200)
        return Reply(405, status_body(405, "MethodNotAllowed"))

    def _store(self, key: tuple[str, str], body: dict[str, Any], status: int) -> Reply:
        self.rv += 1
        stored = copy.deepcopy(body)
        stored["metadata"]["resourceVersion"] = str(self.rv)
        self.leases[key] = stored
        self.writes.append((stored["spec"].get("holderIdentity", ""), stored["spec"]))
        return Reply(status, copy.deepcopy(stored))


class LeaseView:
    """One client's connection to a FakeLeaseServer; ``partitioned`` makes every request fail at
    once (connection refused); ``stalled_on`` makes every request hang for its whole client
    timeout on that clock and then fail, as through a black-holed network path."""

    def __init__(self, server: FakeLeaseServer) -> None:
        self.server = server
        self.partitioned = False
        self.stalled_on: Clock | None = None

    def send(self, method: str, url: str, *, headers: Any, body: bytes | None, request_timeout: Any) -> Any:
        parts = urlsplit(url)
        return self._respond(method, parts.path, orjson.loads(body) if body else None, request_timeout)

    @asynccontextmanager
    async def _respond(
        self, method: str, path: str, body: Any, request_timeout: RequestTimeout
    ) -> AsyncIterator[FakeResponse]:
        if self.partitioned:
            raise TransportError("network partition")
        if self.stalled_on is not None:
            await self.stalled_on.sleep(request_timeout.total or 3600.0)
            raise TransportError(f"{method} {path}: no answer within {request_timeout.total}s")
        yield FakeResponse(self.server.handle(method, path, body))

    async def close(self) -> None:
        return None
