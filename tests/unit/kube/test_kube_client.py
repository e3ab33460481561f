"""ApiClient against the in-memory transport: paths, bodies, typed errors, retries, accounting."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest
from kube_fakes import FakeApiServer, RecordingTransport, Reply, fail_once, make_client, status_body
from llmkube_testing.request_log import ApiRequest, Refusal, RequestLog
from prometheus_client import REGISTRY

from llmkube import __version__
from llmkube.kube.clock import FakeClock, settle
from llmkube.kube.errors import (
    AlreadyExists,
    ApiError,
    Conflict,
    Expired,
    Forbidden,
    Invalid,
    NotFound,
    TooManyRequests,
    error_from_response,
)
from llmkube.kube.resource import CONFIG_MAPS, DEPLOYMENTS, PRIORITY_CLASSES
from llmkube.kube.rest import APPLY_PATCH, ApiClient, TransportError
from llmkube.kube.rest.config import ClientConfig, StaticAuth


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (410, "Expired", Expired),
        (410, "Gone", Expired),
        (422, "Invalid", Invalid),
        (403, "Forbidden", Forbidden),
        (429, "TooManyRequests", TooManyRequests),
        (500, "InternalError", ApiError),
        (418, "", ApiError),
    ],
)
def test_status_bodies_become_typed_errors(status: int, reason: str, expected: type[ApiError]) -> None:
    error = error_from_response(status, orjson.dumps(status_body(status, reason, "boom")))
    assert type(error) is expected
    assert (error.status, error.reason, error.message) == (status, reason, "boom")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (404, NotFound),
        (409, Conflict),
        (410, Expired),
        (422, Invalid),
        (403, Forbidden),
        (429, TooManyRequests),
    ],
)
def test_a_body_that_is_not_a_status_still_maps_by_http_code(status: int, expected: type[ApiError]) -> None:
    error = error_from_response(status, b"<html>proxy error</html>", "7")
    assert type(error) is expected
    assert error.message == "<html>proxy error</html>"
    assert error.retry_after == 7.0


def test_invalid_keeps_the_field_causes() -> None:
    body = status_body(
        422,
        "Invalid",
        'Deployment.apps "x" is invalid: spec.selector: Invalid value: ...: field is immutable',
        causes=[
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: ...: field is immutable",
                "field": "spec.selector",
            }
        ],
    )
    error = error_from_response(422, orjson.dumps(body))
    assert isinstance(error, Invalid)
    assert [(cause.field, cause.reason) for cause in error.causes] == [("spec.selector", "FieldValueInvalid")]
    other = error_from_response(422, orjson.dumps(status_body(422, "Invalid", "spec.replicas: must be >= 0")))
    assert isinstance(other, Invalid) and other.causes == ()


def test_watch_error_events_carry_the_code_in_the_body() -> None:
    from llmkube.kube.errors import error_from_status

    assert isinstance(error_from_status(500, status_body(410, "Expired")), Expired)
    assert isinstance(error_from_status(500, {"code": 410, "message": "too old"}), Expired)


@pytest.mark.parametrize(
    ("resource", "namespace", "name", "expected"),
    [
        (CONFIG_MAPS, "ns", None, "/api/v1/namespaces/ns/configmaps"),
        (CONFIG_MAPS, None, None, "/api/v1/configmaps"),
        (CONFIG_MAPS, "ns", "a.b", "/api/v1/namespaces/ns/configmaps/a.b"),
        (DEPLOYMENTS, "ns", "web", "/apis/apps/v1/namespaces/ns/deployments/web"),
        (PRIORITY_CLASSES, "ignored", "high", "/apis/scheduling.k8s.io/v1/priorityclasses/high"),
    ],
)
def test_paths(resource: Any, namespace: str | None, name: str | None, expected: str) -> None:
    if name is None:
        assert resource.collection_path(namespace) == expected
    else:
        assert resource.object_path(name, namespace) == expected


def test_namespaced_object_path_needs_a_namespace() -> None:
    with pytest.raises(ValueError, match="namespaced"):
        DEPLOYMENTS.object_path("web")


class RotatingAuth:
    def __init__(self) -> None:
        self.token = "old"
        self.refreshes = 0

    async def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    async def refresh(self) -> bool:
        self.refreshes += 1
        self.token = "new"
        return True


async def test_apply_sends_ssa_with_our_manager_user_agent_and_orjson_body() -> None:
    transport = RecordingTransport([Reply(201, {"metadata": {"name": "cm"}})])
    requests = RequestLog()
    client = ApiClient("https://h:1", transport=transport, observer=requests)
    obj, status = await client.apply(
        CONFIG_MAPS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}}
    )
    assert status == 201 and obj["metadata"]["name"] == "cm"
    method, url, headers, body = transport.seen[0]
    assert method == "PATCH"
    assert url == "https://h:1/api/v1/namespaces/ns/configmaps/cm?fieldManager=llmkube-controller&force=true"
    assert headers["Content-Type"] == APPLY_PATCH
    assert headers["User-Agent"] == f"llmkube-controller/{__version__}"
    assert body == b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm","namespace":"ns"}}'
    assert requests.mutating_requests() == 1
    assert requests.request_counts[("PATCH", "201")] == 1
    # An apply that created the object was authorized as a create as well.
    assert requests.used() == {("patch", "", "configmaps"), ("create", "", "configmaps")}


async def test_status_subresource_apply_and_cluster_scoped_path() -> None:
    transport = RecordingTransport([Reply(200, {}), Reply(200, {})])
    client = ApiClient("https://h:1", transport=transport)
    await client.apply(CONFIG_MAPS, {"metadata": {"name": "a", "namespace": "n"}}, subresource="status")
    await client.apply(PRIORITY_CLASSES, {"metadata": {"name": "p"}})
    assert transport.seen[0][1].startswith("https://h:1/api/v1/namespaces/n/configmaps/a/status?")
    assert transport.seen[1][1].startswith("https://h:1/apis/scheduling.k8s.io/v1/priorityclasses/p?")


async def test_delete_sends_uid_preconditions() -> None:
    transport = RecordingTransport([Reply(200, {"kind": "Status"})])
    client = ApiClient("https://h:1", transport=transport)
    await client.delete(DEPLOYMENTS, "web", "ns", uid="u-1", propagation_policy="Background")
    body = orjson.loads(transport.seen[0][3] or b"")
    assert body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u-1"},
        "propagationPolicy": "Background",
    }


async def test_429_is_retried_after_the_servers_delay() -> None:
    clock = FakeClock()
    transport = RecordingTransport(
        [
            Reply(429, status_body(429, "TooManyRequests"), {"Retry-After": "3"}),
            Reply(429, status_body(429, "TooManyRequests"), {"Retry-After": "2"}),
            Reply(200, {"metadata": {"name": "x"}}),
        ]
    )
    requests = RequestLog()
    client = ApiClient("https://h:1", transport=transport, clock=clock, observer=requests)
    task = asyncio.create_task(client.get(CONFIG_MAPS, "x", "ns"))
    await clock.advance(2.9)
    assert len(transport.seen) == 1
    await clock.advance(0.1)
    assert len(transport.seen) == 2
    await clock.advance(2.0)
    assert (await task)["metadata"]["name"] == "x"
    assert requests.request_counts == {("GET", "429"): 2, ("GET", "200"): 1}
    # In RBAC's terms: three attempts at `get configmaps` (each one is authorized).
    assert requests.api_requests == {ApiRequest("get", "", "configmaps", ""): 3}


async def test_429_gives_up_after_max_retries() -> None:
    clock = FakeClock()
    replies = [Reply(429, status_body(429, "TooManyRequests"), {"Retry-After": "1"}) for _ in range(3)]
    client = ApiClient("https://h:1", transport=RecordingTransport(replies), clock=clock, max_retries=2)
    task = asyncio.create_task(client.get(CONFIG_MAPS, "x", "ns"))
    await clock.advance(5)
    with pytest.raises(TooManyRequests):
        await task


async def test_5xx_without_retry_after_is_not_retried() -> None:
    client = ApiClient(
        "https://h:1", transport=RecordingTransport([Reply(500, status_body(500, "InternalError"))])
    )
    with pytest.raises(ApiError) as caught:
        await client.get(CONFIG_MAPS, "x", "ns")
    assert caught.value.status == 500


async def test_401_refreshes_credentials_once() -> None:
    auth = RotatingAuth()
    transport = RecordingTransport([Reply(401, status_body(401, "Unauthorized")), Reply(200, {"ok": True})])
    client = ApiClient("https://h:1", transport=transport, auth=auth)
    assert await client.request("GET", "/version") == {"ok": True}
    assert [seen[2]["Authorization"] for seen in transport.seen] == ["Bearer old", "Bearer new"]
    assert auth.refreshes == 1


async def test_transport_errors_are_counted_and_raised() -> None:
    requests = RequestLog()
    transport = RecordingTransport([TransportError("refused")])  # type: ignore[list-item]
    client = ApiClient("https://h:1", transport=transport, observer=requests)
    with pytest.raises(TransportError):
        await client.get(CONFIG_MAPS, "x", "ns")
    assert requests.request_counts == {("GET", "<error>"): 1}


async def test_refusals_are_recorded_by_their_status_reason_and_causes() -> None:
    terminating = status_body(
        403,
        "Forbidden",
        'deployments.apps "a" is forbidden: unable to create new content in namespace ai',
        causes=[{"reason": "NamespaceTerminating", "field": "metadata.namespace", "message": "..."}],
    )
    transport = RecordingTransport(
        [
            Reply(403, terminating),
            Reply(403, status_body(403, "Forbidden", 'User "x" cannot create resource "deployments"')),
            Reply(404, status_body(404, "NotFound")),
            Reply(403, status_body(403, "Forbidden", 'User "x" cannot create resource "configmaps"')),
        ]
    )
    requests = RequestLog()
    client = ApiClient("https://h:1", transport=transport, observer=requests)
    for _ in range(2):
        with pytest.raises(Forbidden):
            await client.request("POST", "/apis/apps/v1/namespaces/ai/deployments", body={})
    with pytest.raises(NotFound):
        await client.get(CONFIG_MAPS, "x", "ns")
    assert requests.refusals == {
        Refusal("POST", 403, "Forbidden", ("NamespaceTerminating",)): 1,
        Refusal("POST", 403, "Forbidden", ()): 1,
        Refusal("GET", 404, "NotFound", ()): 1,
    }
    # Only the authorizer's 403 is RBAC's: the terminating namespace's is its lifecycle.
    assert requests.rbac_refusals() == {Refusal("POST", 403, "Forbidden", ()): 1}
    # A namespace a test excused (its ResourceQuota refuses by design): its 403s are not RBAC's either.
    requests.excuse_forbidden_in("ai")
    assert requests.rbac_refusals() == {}
    requests.excused.clear()
    with pytest.raises(Forbidden):
        await client.request("POST", "/api/v1/namespaces/other/configmaps", body={})
    requests.excuse_forbidden_in("ai")
    assert requests.rbac_refusals() == {Refusal("POST", 403, "Forbidden", ()): 1}


async def test_rest_client_requests_metric_uses_controller_runtime_labels() -> None:
    labels = {"code": "200", "method": "GET", "host": "metrics.example:6443"}
    before = REGISTRY.get_sample_value("rest_client_requests_total", labels) or 0.0
    client = ApiClient("https://metrics.example:6443", transport=RecordingTransport([Reply(200, {})]))
    await client.request("GET", "/version")
    assert REGISTRY.get_sample_value("rest_client_requests_total", labels) == before + 1


async def test_list_all_follows_continue_tokens() -> None:
    server = FakeApiServer()
    for index in range(5):
        server.put("ns", f"cm-{index}")
    client = make_client(server, FakeClock())
    items = await client.list_all(CONFIG_MAPS, "ns", page_size=2)
    assert [item["metadata"]["name"] for item in items] == [f"cm-{index}" for index in range(5)]
    assert [request.params.get("continue") is not None for request in server.requests] == [False, True, True]
    assert all("resourceVersion" not in request.params for request in server.requests[1:])
    await settle()


async def test_fault_injection_reaches_the_client() -> None:
    server = FakeApiServer()
    server.faults.append(fail_once(403, reason="Forbidden"))
    client = make_client(server, FakeClock())
    with pytest.raises(Forbidden):
        await client.list_page(CONFIG_MAPS, "ns")


async def test_a_stream_cut_after_the_answer_is_not_counted_twice() -> None:
    server = FakeApiServer()
    requests = RequestLog()
    client = ApiClient("https://fake.example:6443", transport=server, clock=FakeClock(), observer=requests)
    with pytest.raises(TransportError):
        async with client.watch(CONFIG_MAPS, "ns", resource_version="1", timeout_seconds=300) as response:
            server.send_raw(TransportError("reset by peer"))
            async for _ in response.iter_chunks():
                pass
    assert requests.request_counts == {("GET", "200"): 1}


async def test_the_controllers_client_has_no_observer_and_a_view_without_the_guard_keeps_one() -> None:
    """The controller counts nothing but the metric: only a test installs an observer (and then the
    leader elector's view of the client, which sends the Lease requests, reports to it too)."""
    config = ClientConfig(host="https://h:1", auth=StaticAuth())
    production = ApiClient.from_config(config)
    assert production.observer is None
    await production.close()
    requests = RequestLog()
    transport = RecordingTransport([Reply(200, {})])
    observed = ApiClient("https://h:1", transport=transport, observer=requests).without_write_guard()
    await observed.request("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l")
    assert requests.api_requests == {ApiRequest("get", "coordination.k8s.io", "leases", ""): 1}
