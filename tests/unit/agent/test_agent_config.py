"""`llmkube agent`'s start-up checks and its state file: a value no host could use stops it with a
message naming the flag; the state file round-trips and is not rewritten when nothing changed."""

import argparse
import os
import socket
from pathlib import Path

import pytest

from llmkube.agent import config as c
from llmkube.agent.flags import add_agent_flags
from llmkube.agent.host import check_advertise_address, free_port, meminfo
from llmkube.agent.state import STATE_FILE, ServerRecord, load, save
from llmkube.plan.agent.download import DownloadLimits
from llmkube.plan.agent.memory import default_budget


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_agent_flags(parser)
    return parser.parse_args(list(argv))


@pytest.mark.parametrize(
    ("value", "expected"), [("Host-A", "host-a"), (" mac ", "mac"), ("a" * 63, "a" * 63)]
)
def test_agent_names_are_dns_labels(value: str, expected: str) -> None:
    assert c.agent_name(value) == expected


@pytest.mark.parametrize("value", ["", "a.b", "-a", "a_b", "a" * 64])
def test_a_name_that_is_no_dns_label_names_the_flag(value: str) -> None:
    with pytest.raises(c.AgentConfigError, match=r"^--name: "):
        c.agent_name(value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("", None), ("30000-30002", range(30000, 30003)), ("8080-8080", range(8080, 8081))],
)
def test_server_ports(value: str, expected: range | None) -> None:
    assert c.server_ports(value) == expected


@pytest.mark.parametrize("value", ["30000", "2-1", "0-10", "1-65536", "a-b", "-5"])
def test_a_bad_port_range_names_the_flag(value: str) -> None:
    with pytest.raises(c.AgentConfigError, match=r"^--server-ports: "):
        c.server_ports(value)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "--advertise-address is required"),
        ("localhost", "is not an IP address"),
        ("127.0.0.1", "a loopback address"),
        ("::1", "a loopback address"),
        ("0.0.0.0", "the unspecified address"),
        ("169.254.1.1", "link-local"),
        ("192.0.2.123", "not an address of this host"),  # TEST-NET-1 on no interface of ours
    ],
)
def test_an_advertise_address_the_cluster_cannot_reach_is_refused(value: str, why: str) -> None:
    if value == "192.0.2.123":
        try:
            check_advertise_address(value)
            pytest.skip("this host has 192.0.2.123")
        except ValueError:
            pass
    with pytest.raises(c.AgentConfigError, match=why):
        c.checked_address(value)


def test_the_budget_by_default_and_as_given() -> None:
    total = 32 * 2**30
    assert c.budget("", total) == default_budget(total) == int(total * 0.67)
    assert c.budget("8Gi", total) == 8 * 2**30
    assert c.budget("50%", total) == total // 2
    with pytest.raises(c.AgentConfigError, match=r"^--memory-budget: "):
        c.budget("lots", total)
    with pytest.raises(c.AgentConfigError, match="--memory-budget as a quantity"):
        c.budget("", 0)


def test_a_missing_llama_server_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(c.AgentConfigError, match=r"^--llama-server: "):
        c.find_llama_server(str(tmp_path / "llama-server"))
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(c.AgentConfigError, match="not an executable file"):
        c.find_llama_server(str(script))
    script.chmod(0o755)
    assert c.find_llama_server(str(script)) == str(script)


def test_flags_default_to_loopback_probes_and_leave_servers_running() -> None:
    args = parse("--advertise-address=10.0.0.5")
    assert (args.metrics_bind_address, args.health_probe_bind_address) == ("127.0.0.1:9090", "127.0.0.1:9091")
    assert (args.heartbeat_interval, args.stop_on_exit) == (30.0, False)
    assert parse("--stop-on-exit").stop_on_exit is True


def test_downloads_are_bounded_by_default_and_as_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_ENDPOINT", raising=False)
    args = parse()
    limits = c.download_limits(args.max_model_bytes, args.download_min_speed, args.download_min_speed_time)
    assert limits == DownloadLimits(max_file_bytes=256 * 1024**3, min_speed=32 * 1024, min_speed_time=120.0)
    assert c.hf_endpoint(args.hf_endpoint) == "https://huggingface.co"
    args = parse(
        "--max-model-bytes=40Gi",
        "--download-min-speed=0",
        "--download-min-speed-time=30",
        "--hf-endpoint=http://hub.internal:8080/",
    )
    limits = c.download_limits(args.max_model_bytes, args.download_min_speed, args.download_min_speed_time)
    assert (limits.max_file_bytes, limits.min_speed, limits.min_speed_time) == (40 * 1024**3, 0, 30.0)
    assert c.hf_endpoint(args.hf_endpoint) == "http://hub.internal:8080"


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--max-model-bytes=0"], "--max-model-bytes"),
        (["--max-model-bytes=-1Gi"], "--max-model-bytes"),
        (["--max-model-bytes=lots"], "--max-model-bytes"),
        (["--max-model-bytes=1.5"], "--max-model-bytes"),
        (["--download-min-speed=fast"], "--download-min-speed"),
        (["--download-min-speed-time=0"], "--download-min-speed-time"),
    ],
)
def test_a_download_bound_no_host_could_use_names_the_flag(argv: list[str], flag: str) -> None:
    args = parse(*argv)
    with pytest.raises(c.AgentConfigError, match=rf"^{flag}: "):
        c.download_limits(args.max_model_bytes, args.download_min_speed, args.download_min_speed_time)


@pytest.mark.parametrize("value", ["huggingface.co", "ftp://hub", "file:///hub", ""])
def test_a_hub_that_is_no_http_url_names_the_flag(value: str) -> None:
    with pytest.raises(c.AgentConfigError, match=r"^--hf-endpoint: "):
        c.hf_endpoint(value)


def test_the_controllers_namespace_is_where_manifests_agent_gives_the_list_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The controller's list of metal Services: llmkube-system by default (where manifests/agent
    lets the agent read it), else the flag or its variable; a name that is no namespace is refused."""
    monkeypatch.delenv("LLMKUBE_AGENT_CONTROLLER_NAMESPACE", raising=False)
    assert parse().controller_namespace == "llmkube-system"
    assert parse("--controller-namespace=ops").controller_namespace == "ops"
    assert c.namespace_name("--controller-namespace", " ops ") == "ops"
    with pytest.raises(c.AgentConfigError, match=r"^--controller-namespace: 'Ops/x' is not a namespace"):
        c.namespace_name("--controller-namespace", "Ops/x")


def test_meminfo_is_read_in_bytes() -> None:
    fields = meminfo("MemTotal:       16314768 kB\nMemAvailable:    9876543 kB\nHugePages_Total:       0\n")
    assert fields == {"MemTotal": 16314768 * 1024, "MemAvailable": 9876543 * 1024, "HugePages_Total": 0}


def test_a_free_port_skips_taken_ones_and_its_own() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = taken.getsockname()[1]
        assert free_port("127.0.0.1", range(busy, busy + 1), set()) is None
        found = free_port("127.0.0.1", range(busy, busy + 3), {busy + 1})
        assert found in (busy + 2, None)  # None only if another program holds busy + 2
        assert free_port("127.0.0.1", None, set()) not in (None, busy)


def record(**changes: object) -> ServerRecord:
    base: dict[str, object] = {
        "key": "ai/chat",
        "uid": "u-1",
        "role": "current",
        "pid": 4242,
        "port": 41234,
        "command": ("llama-server", "--port", "41234"),
        "identity": "id",
        "fingerprint": "boot:123:llama-server --port 41234",
        "log_path": "/var/lib/llmkube-agent/logs/ai_chat-41234.log",
        "need": 2**30,
        "source_identity": "file",
    }
    return ServerRecord(**{**base, **changes})  # type: ignore[arg-type]


def test_the_state_file_round_trips_and_is_not_rewritten_unchanged(tmp_path: Path) -> None:
    records = [record(), record(role="next", pid=4343, port=41235)]
    save(tmp_path, records)
    assert load(tmp_path) == records
    path = tmp_path / STATE_FILE
    os.utime(path, (1, 1))
    save(tmp_path, records)
    assert path.stat().st_mtime == 1  # nothing changed: nothing written
    save(tmp_path, records[:1])
    assert load(tmp_path) == records[:1]


@pytest.mark.parametrize("text", ["", "{", "[]", '{"servers": [{"key": "x"}]}'])
def test_an_unreadable_state_file_adopts_nothing(tmp_path: Path, text: str) -> None:
    (tmp_path / STATE_FILE).write_text(text)
    assert load(tmp_path) == []
    assert load(tmp_path / "missing") == []
