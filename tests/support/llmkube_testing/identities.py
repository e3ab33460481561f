"""Fresh identities for tests: a real ServiceAccount and a kubeconfig with a token the API server
issued for it (TokenRequest), so a test can bind exactly the roles it means to prove and nothing
else grants the identity anything (unlike the cluster's fixed token users, which other tests bind).
"""

from pathlib import Path

import yaml

from llmkube_testing.rest import KubeRest, RestError

__all__ = ["service_account_kubeconfig"]


def service_account_kubeconfig(
    admin_kubeconfig: Path, namespace: str, name: str, target: Path, *, seconds: int = 3600
) -> Path:
    """Create ServiceAccount `namespace/name` (if missing), request a token for it and write a
    kubeconfig for the same server to `target`. Its user is
    `system:serviceaccount:<namespace>:<name>`."""
    admin = KubeRest.from_kubeconfig(admin_kubeconfig)
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace},
    }
    try:
        admin.create(account)
    except RestError as error:
        if error.status != 409:
            raise
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": seconds},
    }
    issued = admin.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", request)
    config = yaml.safe_load(admin_kubeconfig.read_text())
    user = f"system:serviceaccount:{namespace}:{name}"
    context = config["contexts"][0]["context"]
    config["users"] = [{"name": user, "user": {"token": issued["status"]["token"]}}]
    config["contexts"] = [{"name": "sa", "context": {"cluster": context["cluster"], "user": user}}]
    config["current-context"] = "sa"
    target.write_text(yaml.safe_dump(config))
    return target
