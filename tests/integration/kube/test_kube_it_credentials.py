"""Each kind of kubeconfig credential, against a real kube-apiserver: the server says who we are.

(The token of the standard kubeconfig is used by every other integration test; the in-cluster
service account by the node tier's in-cluster controller.)"""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from llmkube_testing.pki import ClusterPKI, issue_certificate

from llmkube.kube.errors import Unauthorized
from llmkube.kube.resource import NAMESPACES
from llmkube.kube.rest import ApiClient, load_client_config

pytestmark = pytest.mark.integration

SELF_SUBJECT_REVIEW: dict[str, Any] = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}


def with_user(api_cluster: Any, user: dict[str, Any], path: Path) -> Path:
    """The cluster's own kubeconfig with its user replaced."""
    document = yaml.safe_load(Path(api_cluster.kubeconfig).read_text())
    document["users"] = [{"name": "someone", "user": user}]
    document["contexts"][0]["context"]["user"] = "someone"
    path.write_text(yaml.safe_dump(document))
    return path


async def whoami(kubeconfig: Path) -> dict[str, Any]:
    async with ApiClient.from_config(await load_client_config(kubeconfig)) as client:
        review = await client.request(
            "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body=SELF_SUBJECT_REVIEW
        )
        await client.list_page(NAMESPACES, limit=1)  # and the identity may act
    info: dict[str, Any] = review["status"]["userInfo"]
    return info


def admin_token(api_cluster: Any) -> str:
    document = yaml.safe_load(Path(api_cluster.kubeconfig).read_text())
    token: str = document["users"][0]["user"]["token"]
    return token


async def test_a_client_certificate(api_cluster: Any, tmp_path: Path) -> None:
    if api_cluster.local is None:
        pytest.skip("needs the local cluster's CA to issue a client certificate")
    pki_dir = api_cluster.workdir / "pki"
    pki = ClusterPKI(
        ca_cert=pki_dir / "ca.crt",
        ca_key=pki_dir / "ca.key",
        serving_cert=pki_dir / "apiserver.crt",
        serving_key=pki_dir / "apiserver.key",
        sa_key=pki_dir / "sa.key",
        sa_pub=pki_dir / "sa.pub",
    )
    cert, key = issue_certificate(
        pki, "it-client", common_name="it-client", organizations=("system:masters",)
    )
    user = {
        "client-certificate-data": base64.b64encode(cert.read_bytes()).decode(),
        "client-key-data": base64.b64encode(key.read_bytes()).decode(),
    }
    info = await whoami(with_user(api_cluster, user, tmp_path / "config"))
    assert info["username"] == "it-client"
    assert "system:masters" in info["groups"]


PLUGIN = """#!{python}
import json, sys
with open({calls!r}, "a") as f:
    f.write("call\\n")
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                   "status": {{"token": open({token!r}).read().strip()}}}}))
"""


async def test_an_exec_plugin_and_a_token_it_renews_after_a_401(api_cluster: Any, tmp_path: Path) -> None:
    token_file, calls = tmp_path / "current-token", tmp_path / "calls"
    token_file.write_text("not-a-valid-token")
    plugin = tmp_path / "plugin"
    plugin.write_text(PLUGIN.format(python=sys.executable, calls=str(calls), token=str(token_file)))
    plugin.chmod(0o755)
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": str(plugin)}}
    kubeconfig = with_user(api_cluster, user, tmp_path / "config")
    config = await load_client_config(kubeconfig)
    async with ApiClient.from_config(config) as client:
        # The plugin's first token is refused; the client runs it again once, then gives up.
        with pytest.raises(Unauthorized):
            await client.list_page(NAMESPACES, limit=1)
        assert calls.read_text().count("call") == 2
        token_file.write_text(admin_token(api_cluster))  # the user logs in again
        assert (await client.list_page(NAMESPACES, limit=1))["kind"] == "NamespaceList"
        assert calls.read_text().count("call") == 3  # 401, run again, retried with the new token
    info = await whoami(kubeconfig)
    assert info["username"] == "llmkube-admin"
