"""The process layer without a real cluster: config, logging, registration, health, and a full run
against the in-memory API server (the real-cluster runs are in tests/integration/kube)."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import time
from typing import Any

import aiohttp
import orjson
import pytest
import structlog
from kube_fakes import FakeApiServer, fail_once, is_watch, make_client
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from llmkube.kube.cache import keep_only
from llmkube.kube.clock import FakeClock, RealClock
from llmkube.kube.control import Watch
from llmkube.kube.resource import CONFIG_MAPS, PRIORITY_CLASSES
from llmkube.kube.types import ObjectKey
from llmkube.manager import DEFAULT_LEASE_NAME, Manager, ManagerConfig, configure_logging
from llmkube.manager.config import parse_bind_address


@pytest.mark.parametrize(
    ("address", "expected"),
    [
        (":8080", ("0.0.0.0", 8080)),
        ("127.0.0.1:0", ("127.0.0.1", 0)),
        ("[::1]:9", ("::1", 9)),
        ("0", None),
        ("", None),
    ],
)
def test_bind_addresses(address: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(address) == expected


def test_bind_address_without_port_is_refused() -> None:
    with pytest.raises(ValueError, match="host:port"):
        parse_bind_address("localhost")


def test_defaults_match_the_issue() -> None:
    config = ManagerConfig()
    assert config.lease_name == DEFAULT_LEASE_NAME == "882d6afe.llmkube.dev"
    assert (config.metrics_bind_address, config.health_bind_address) == (":8080", ":8081")
    assert config.graceful_shutdown_timeout == 30.0
    timing = config.leader_timing
    assert (timing.lease_duration, timing.renew_deadline, timing.retry_period) == (15.0, 10.0, 2.0)
    assert ManagerConfig(namespace="").watch_namespace is None


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class JSONSink(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.buffer = io.BytesIO()


def test_json_lines_by_default_with_context_variables() -> None:
    sink = JSONSink()
    configure_logging("info", "auto", sink)
    try:
        with structlog.contextvars.bound_contextvars(
            controller="c", controllerKind="Model", namespace="ns", name="n", reconcileID="r"
        ):
            structlog.get_logger("llmkube.t").info("reconciled", changed=1)
        structlog.get_logger("llmkube.t").debug("hidden")
        structlog.get_logger().info("unnamed")
        line, unnamed = sink.buffer.getvalue().splitlines()
        record = orjson.loads(line)
        # controller-runtime's keys: ts, level, msg, logger (zap's logger name), the object's.
        keys = ("msg", "level", "logger", "controller", "controllerKind", "namespace", "name", "reconcileID")
        assert "event" not in record and "timestamp" not in record
        assert {key: record[key] for key in keys} == {
            "msg": "reconciled", "level": "info", "logger": "llmkube.t", "controller": "c",
            "controllerKind": "Model", "namespace": "ns", "name": "n", "reconcileID": "r",
        }  # fmt: skip
        assert list(record)[:3] == ["ts", "level", "msg"]
        assert record["ts"].endswith("Z")
        assert "logger" not in orjson.loads(unnamed)
    finally:
        structlog.reset_defaults()


def test_console_on_a_tty_and_explicit_json_wins() -> None:
    tty = FakeTTY()
    configure_logging("debug", "auto", tty)
    try:
        structlog.get_logger("t").debug("hello", key="value")
        assert "hello" in tty.getvalue() and "key" in tty.getvalue()
        assert not tty.getvalue().lstrip().startswith("{")
    finally:
        structlog.reset_defaults()
    with pytest.raises(ValueError, match="log level"):
        configure_logging("loud")
    with pytest.raises(ValueError, match="log format"):
        configure_logging("info", "xml")


def quiet_config(**overrides: Any) -> ManagerConfig:
    defaults: dict[str, Any] = {
        "metrics_bind_address": "127.0.0.1:0",
        "health_bind_address": "127.0.0.1:0",
        "configure_logging": False,
        "handle_signals": False,
    }
    return ManagerConfig(**{**defaults, **overrides})


async def noop(key: ObjectKey) -> None:
    return None


async def test_informers_are_shared_per_resource_scope_and_selector() -> None:
    manager = Manager(quiet_config(namespace="team"), client=make_client(FakeApiServer(), FakeClock()))
    first = manager.informer(CONFIG_MAPS, label_selector="a=b")
    assert manager.informer(CONFIG_MAPS, label_selector="a=b") is first
    assert first.namespace == "team"  # the manager's scope
    assert manager.informer(CONFIG_MAPS, label_selector="c=d") is not first
    assert manager.informer(CONFIG_MAPS, namespace="other", label_selector="a=b").namespace == "other"
    assert manager.informer(PRIORITY_CLASSES).namespace is None  # cluster-scoped: no namespace
    manager.add_controller("shared-a", noop, watches=[Watch(CONFIG_MAPS, label_selector="a=b")])
    manager.add_controller("shared-b", noop, watches=[Watch(CONFIG_MAPS, label_selector="a=b")])
    assert len(manager.informers) == 4
    with pytest.raises(ValueError, match="already registered"):
        manager.add_controller("shared-a", noop, watches=[Watch(CONFIG_MAPS)])
    with pytest.raises(ValueError, match="watches nothing"):
        manager.add_controller("empty", noop, watches=[])


async def test_a_shared_informer_keeps_the_transform_it_was_created_with() -> None:
    manager = Manager(quiet_config(), client=make_client(FakeApiServer(), FakeClock()))
    trimmed = keep_only(("data",))
    informer = manager.informer(CONFIG_MAPS, transform=trimmed)
    assert informer.transform is trimmed
    # A watch of the same informer (no transform of its own) shares it, trimmed.
    manager.add_controller("trimmed", noop, watches=[Watch(CONFIG_MAPS)])
    assert manager.informer(CONFIG_MAPS) is informer and len(manager.informers) == 1
    assert manager.informer(CONFIG_MAPS, transform=trimmed) is informer
    with pytest.raises(ValueError, match="another transform"):
        manager.informer(CONFIG_MAPS, transform=keep_only(("metadata", "labels")))


async def test_full_run_against_the_fake_server() -> None:
    server = FakeApiServer()
    server.put("team", "a", {"k": "v"})
    clock = RealClock()
    seen: list[ObjectKey] = []
    reconciled = asyncio.Event()

    async def reconcile(key: ObjectKey) -> None:
        seen.append(key)
        reconciled.set()

    def setup(manager: Manager) -> None:
        manager.add_controller("fake-run", reconcile, watches=[Watch(CONFIG_MAPS)])

    manager = Manager(quiet_config(namespace="team"), client=make_client(server, clock), clock=clock)
    running = asyncio.create_task(manager.run(setup))
    await asyncio.wait_for(manager.controllers_started.wait(), 5)
    await asyncio.wait_for(reconciled.wait(), 5)
    assert seen == [ObjectKey("team", "a")]
    assert manager.controller("fake-run").kind == "ConfigMap"  # its logs' controllerKind
    async with aiohttp.ClientSession() as http:
        async with http.get(manager.http.url("health") + "/readyz") as response:
            assert (response.status, await response.text()) == (200, "ok\n")
        async with http.get(manager.http.url("health") + "/healthz") as response:
            assert response.status == 200
        async with http.get(manager.http.url("metrics") + "/metrics") as response:
            assert response.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
            families = {
                family.name: family for family in text_string_to_metric_families(await response.text())
            }
        # What Prometheus sends when it prefers OpenMetrics: the same families in that format.
        accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        async with http.get(manager.http.url("metrics") + "/metrics", headers={"Accept": accept}) as response:
            assert response.headers["Content-Type"].startswith("application/openmetrics-text; version=1.0.0")
            openmetrics = {family.name: family for family in openmetrics_families(await response.text())}
    assert any(sample.labels == {"controller": "fake-run", "result": "success"} and sample.value >= 1
               for sample in openmetrics["controller_runtime_reconcile"].samples)  # fmt: skip
    reconciles = families["controller_runtime_reconcile"]
    assert any(sample.labels == {"controller": "fake-run", "result": "success"} and sample.value >= 1
               for sample in reconciles.samples)  # fmt: skip
    assert "process_cpu_seconds" in families
    assert not any(
        name.endswith("_created") for family in families.values() for name in [s.name for s in family.samples]
    )
    with pytest.raises(RuntimeError, match="setup"):
        manager.add_controller("late", reconcile, watches=[Watch(CONFIG_MAPS)])
    manager.request_shutdown()
    await asyncio.wait_for(running, 10)
    assert not manager.controller("fake-run").running


async def test_readyz_reports_unsynced_caches_and_long_failing_watches() -> None:
    server = FakeApiServer()
    server.faults.extend(fail_once(403, reason="Forbidden", when=is_watch) for _ in range(1000))
    clock = FakeClock()
    manager = Manager(
        quiet_config(watch_failure_tolerance=60), client=make_client(server, clock), clock=clock
    )
    informer = manager.informer(CONFIG_MAPS)
    assert manager.readyz() == ["cache not synced: configmaps (all namespaces)"]
    informer.start()
    await clock.advance(1)
    assert manager.readyz() == []  # synced; the failing watch is still within tolerance
    for _ in range(10):
        await clock.advance(10)
    problems = manager.readyz()
    assert len(problems) == 1 and problems[0].startswith("watch of configmaps (all namespaces) failing for")
    assert "Forbidden" in problems[0]
    assert manager.healthz() == []  # failing watches are a readiness problem, not a liveness one
    await informer.stop()


HUNG_CALL_SCRIPT = """
import asyncio, sys, threading, time
from llmkube.kube.rest.client import ApiClient
from llmkube.kube.rest.transport import AiohttpTransport
from llmkube.manager import Manager, ManagerConfig

def setup(manager):
    # A library call in the loop's default executor that never returns, like aiohttp's DNS lookup
    # (getaddrinfo) against a resolver that does not answer.
    asyncio.get_running_loop().run_in_executor(None, threading.Event().wait)
    asyncio.get_running_loop().call_later(0.2, manager.request_shutdown)

config = ManagerConfig(
    metrics_bind_address="0", health_bind_address="0", configure_logging=False, handle_signals=False
)
client = ApiClient("https://127.0.0.1:9", transport=AiohttpTransport())
asyncio.run(Manager(config, client=client).run(setup))
print("exited", flush=True)
"""


def test_a_hung_call_in_the_default_executor_does_not_hold_up_the_exit() -> None:
    """asyncio.run joins the default executor without a timeout (Python 3.11), and the interpreter
    joins its threads again at exit: the manager's loop runs such calls in daemon threads."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", HUNG_CALL_SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip().endswith("exited"), done.stderr[-2000:]
    assert time.monotonic() - started < 30
