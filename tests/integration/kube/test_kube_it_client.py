"""The ApiClient against a real kube-apiserver: auth, TLS, verbs, typed errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from llmkube_testing.request_log import RequestLog

from llmkube import __version__
from llmkube.kube.errors import AlreadyExists, Conflict, Forbidden, Invalid, NotFound
from llmkube.kube.resource import CONFIG_MAPS, NAMESPACES
from llmkube.kube.rest import load_client_config
from llmkube.kube.rest.client import USER_AGENT, ApiClient

pytestmark = pytest.mark.integration


def config_map(namespace: str, name: str, data: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


async def test_crud_and_typed_errors(client: ApiClient, requests: RequestLog, namespace: str) -> None:
    created = await client.create(CONFIG_MAPS, config_map(namespace, "a", {"k": "v"}))
    assert created["metadata"]["uid"]
    with pytest.raises(AlreadyExists):
        await client.create(CONFIG_MAPS, config_map(namespace, "a", {}))
    fetched = await client.get(CONFIG_MAPS, "a", namespace)
    assert fetched["data"] == {"k": "v"}
    stale = dict(fetched, data={"k": "w"})
    await client.replace(CONFIG_MAPS, dict(fetched, data={"k": "x"}))
    with pytest.raises(Conflict):
        await client.replace(CONFIG_MAPS, stale)  # old resourceVersion
    patched = await client.patch(CONFIG_MAPS, "a", {"data": {"extra": "1"}}, namespace)
    assert patched["data"] == {"k": "x", "extra": "1"}
    with pytest.raises(Invalid) as invalid:
        await client.create(CONFIG_MAPS, config_map(namespace, "Not_Valid", {}))
    assert [cause.field for cause in invalid.value.causes] == ["metadata.name"]
    with pytest.raises(Conflict):
        await client.delete(CONFIG_MAPS, "a", namespace, uid="not-the-uid")  # precondition failed
    await client.delete(CONFIG_MAPS, "a", namespace, uid=created["metadata"]["uid"])
    with pytest.raises(NotFound):
        await client.get(CONFIG_MAPS, "a", namespace)
    assert requests.request_counts[("POST", "201")] == 1
    assert requests.request_counts[("GET", "404")] == 1


async def test_apply_creates_then_updates(client: ApiClient, namespace: str) -> None:
    obj, status = await client.apply(CONFIG_MAPS, config_map(namespace, "applied", {"a": "1"}))
    assert status == 201
    entry = obj["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"]) == ("llmkube-controller", "Apply")
    obj, status = await client.apply(CONFIG_MAPS, config_map(namespace, "applied", {"a": "2"}))
    assert (status, obj["data"]) == (200, {"a": "2"})


async def test_paged_list(client: ApiClient, requests: RequestLog, namespace: str) -> None:
    for index in range(7):
        await client.create(CONFIG_MAPS, config_map(namespace, f"cm-{index}", {}))
    items = await client.list_all(CONFIG_MAPS, namespace, page_size=3)
    names = sorted(item["metadata"]["name"] for item in items if item["metadata"]["name"].startswith("cm-"))
    assert names == [f"cm-{index}" for index in range(7)]
    assert requests.request_counts[("GET", "200")] >= 3


async def test_restricted_identity_gets_forbidden(api_cluster: object) -> None:
    config = await load_client_config(api_cluster.restricted_kubeconfig)  # type: ignore[attr-defined]
    async with ApiClient.from_config(config) as restricted:
        with pytest.raises(Forbidden):
            await restricted.list_page(NAMESPACES)


async def test_user_agent_reaches_the_server(client: ApiClient, namespace: str) -> None:
    obj, _ = await client.apply(CONFIG_MAPS, config_map(namespace, "ua", {"a": "1"}))
    # The apiserver does not echo the user agent, but managedFields of an *Update* default the
    # manager name to it: a PUT without fieldManager shows who we are.
    obj["data"] = {"a": "1", "x": "1"}
    updated = await client.replace(CONFIG_MAPS, obj)
    entries = {(entry["manager"], entry["operation"]) for entry in updated["metadata"]["managedFields"]}
    # The Update manager is the user agent up to its first "/": llmkube-controller/<version>.
    assert entries == {("llmkube-controller", "Apply"), (USER_AGENT.split("/")[0], "Update")}
    assert f"llmkube-controller/{__version__}" == USER_AGENT


EXEC_PLUGIN = """#!/bin/sh
# The first credential it hands out is wrong; later ones are right (a rotated token).
count=$(cat "$0.count" 2>/dev/null || echo 0)
echo $((count + 1)) > "$0.count"
if [ "$count" = "0" ]; then token=expired-token; else token="$REAL_TOKEN"; fi
kind='"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"'
printf '{%s,"status":{"token":"%s"}}' "$kind" "$token"
"""


async def test_exec_plugin_credentials_are_refreshed_after_a_401(api_cluster: object, tmp_path: Path) -> None:
    admin = yaml.safe_load(api_cluster.kubeconfig.read_text())  # type: ignore[attr-defined]
    plugin = tmp_path / "credential-plugin.sh"
    plugin.write_text(EXEC_PLUGIN)
    plugin.chmod(0o755)
    exec_config = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": str(plugin),
        "env": [{"name": "REAL_TOKEN", "value": admin["users"][0]["user"]["token"]}],
        "interactiveMode": "Never",
    }
    kubeconfig = {**admin, "users": [{"name": admin["users"][0]["name"], "user": {"exec": exec_config}}]}
    path = tmp_path / "exec.kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    requests = RequestLog()
    async with ApiClient.from_config(await load_client_config(path), observer=requests) as exec_client:
        namespaces = await exec_client.list_page(NAMESPACES, limit=1)
    assert namespaces["kind"] == "NamespaceList"
    assert requests.request_counts == {("GET", "401"): 1, ("GET", "200"): 1}
    assert (tmp_path / "credential-plugin.sh.count").read_text().strip() == "2"
