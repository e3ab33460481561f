"""A metal service's server key (plan/inferenceservice/server_key.py): one per service, derived the
same way by the controller and every agent, written once into the service's Secret and recorded on
its Service."""

import base64
from pathlib import Path

import pytest
from isvc_factories import make_isvc, make_model, observe
from isvc_planning import plan

from llmkube.agent.server_keys import read_key
from llmkube.controllers.server_key_master import MasterKeyUnusable, _key_of
from llmkube.plan.agent.launch import Host, api_key_file_of, server_command
from llmkube.plan.inferenceservice.server_key import (
    ANNOTATION,
    derive,
    fingerprint,
    secret_name,
    service_key,
)

MASTER = b"m" * 32
METAL = make_model(hardware={"accelerator": "metal"})


def test_a_key_is_the_services_own() -> None:
    key = derive(MASTER, "ai", "chat", "uid-1")
    assert len(key) == 64 and key == derive(MASTER, "ai", "chat", "uid-1")
    others = {
        derive(MASTER, "ai", "chat", "uid-2"),  # made again under its name
        derive(MASTER, "ai", "other", "uid-1"),
        derive(MASTER, "team", "chat", "uid-1"),
        derive(b"n" * 32, "ai", "chat", "uid-1"),  # a rotated master
        derive(MASTER, "ai/chat", "", "uid-1"),  # no way to shift a part into another
    }
    assert key not in others and len(others) == 5


def test_the_metal_plan_writes_the_key_and_records_it_on_the_service() -> None:
    isvc = make_isvc()
    result = plan(isvc=isvc, model=METAL, observed=observe(server_key_master=MASTER))
    assert result.server_key is not None and result.service is not None
    secret = result.server_key
    assert secret["metadata"]["name"] == secret_name("demo") == "demo-server-key"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == isvc.metadata.uid
    assert secret["stringData"]["key"] == service_key(isvc, MASTER)
    recorded = result.service["metadata"]["annotations"][ANNOTATION]
    assert recorded == f"demo-server-key/{fingerprint(service_key(isvc, MASTER))}"
    assert service_key(isvc, MASTER) not in str(result.service)  # the key itself is never on the Service


def test_no_key_for_a_service_in_the_cluster() -> None:
    result = plan(model=make_model(), observed=observe(server_key_master=None))
    assert result.server_key is None
    assert ANNOTATION not in ((result.service or {}).get("metadata") or {}).get("annotations", {})


def test_a_refused_metal_spec_writes_no_key() -> None:
    result = plan(
        {"endpoint": {"type": "LoadBalancer"}}, model=METAL, observed=observe(server_key_master=MASTER)
    )
    assert result.server_key is None and result.service is None


def test_the_agent_gives_its_server_the_key_as_a_file() -> None:
    isvc = make_isvc()
    command = server_command(
        "llama-server",
        isvc,
        METAL,
        model_path="/m.gguf",
        port=8080,
        host=Host("10.0.0.2", metal=False),
        api_key_file="/var/lib/llmkube-agent/keys/ai.demo.key",
    )
    assert command[-2:] == ("--api-key-file", "/var/lib/llmkube-agent/keys/ai.demo.key")
    assert api_key_file_of(command) == "/var/lib/llmkube-agent/keys/ai.demo.key"
    assert not any(service_key(isvc, MASTER) in word for word in command)


def test_a_key_file_is_read_as_llama_server_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text("# a comment\n\nabc123\nsecond\n")
    assert read_key(str(path)) == "abc123"
    assert read_key(str(tmp_path / "missing")) is None
    assert read_key(None) is None


@pytest.mark.parametrize(
    "data",
    [
        {},
        {"key": base64.b64encode(b"short").decode()},
        {"key": "not base64 !"},
    ],
)
def test_an_unusable_master_is_said(data: dict[str, str]) -> None:
    with pytest.raises(MasterKeyUnusable, match="delete it, and the controller makes a new one"):
        _key_of({"data": data}, "llmkube-system")


def test_a_master_is_read_from_its_secret() -> None:
    assert _key_of({"data": {"key": base64.b64encode(MASTER + b"\n").decode()}}, "ns") == MASTER
