"""manifests/admission/secret_references_policy.yaml on a real API server, from the tenant's own
token: an InferenceService may name only Secrets its author may read. A tenant bound to
`llmkube-editor` alone (no Secrets) is refused every reference, by Secret name; granted `get` on one
Secret, it may name that one and no other; an admin may name any.

The policy is applied as shipped; only its binding is narrowed to this module's namespace."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from llmkube.api.crds import all_crds
from llmkube.testing.identities import service_account_kubeconfig
from llmkube.testing.pytest_plugin import ClusterHandle, apply_manifests
from llmkube.testing.rest import KubeRest, RestError, load_yaml_documents

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "manifests" / "admission" / "secret_references_policy.yaml"
USER_ROLES = ROOT / "manifests" / "rbac" / "user_roles.yaml"
API = "inference.llmkube.dev/v1alpha1"
SCOPE_LABEL = "llmkube-test/secret-references"


def service(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "InferenceService",
        "metadata": {"name": name},
        "spec": {"modelRef": "m", **spec},
    }


def secret_env(secret: str) -> dict[str, Any]:
    return {"env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}}]}


REFERENCES = {
    "env": secret_env,
    "pull": lambda secret: {"imagePullSecrets": [{"name": secret}]},
    "vllm": lambda secret: {
        "runtime": "vllm",
        "vllmConfig": {"hfTokenSecretRef": {"name": secret, "key": "t"}},
    },
    "tgi": lambda secret: {"runtime": "tgi", "tgiConfig": {"hfTokenSecretRef": {"name": secret, "key": "t"}}},
    "personaplex": lambda secret: {
        "runtime": "personaplex",
        "image": "i",
        "personaPlexConfig": {"hfTokenSecretRef": {"name": secret, "key": "t"}},
    },
    # v0.9
    "sglang": lambda secret: {
        "runtime": "sglang",
        "sglangConfig": {"hfTokenSecretRef": {"name": secret, "key": "t"}},
    },
    "secret-volume": lambda secret: {"extraVolumes": [{"name": "v", "secret": {"secretName": secret}}]},
    "projected-secret": lambda secret: {
        "extraVolumes": [{"name": "v", "projected": {"sources": [{"secret": {"name": secret}}]}}]
    },
    "csi-publish-secret": lambda secret: {
        "extraVolumes": [
            {"name": "v", "csi": {"driver": "d.example", "nodePublishSecretRef": {"name": secret}}}
        ]
    },
}


@pytest.fixture(scope="module")
def scoped(
    api_cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, KubeRest]]:
    """A namespace under the policy, and a tenant in it with llmkube-editor only."""
    admin = api_cluster.admin()
    apply_manifests(api_cluster, all_crds())
    apply_manifests(api_cluster, load_yaml_documents(USER_ROLES))
    namespace = "secret-refs"
    admin.apply(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {SCOPE_LABEL: "on"}},
        }
    )
    docs = load_yaml_documents(POLICY)
    binding = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding")
    binding["spec"]["matchResources"] = {"namespaceSelector": {"matchLabels": {SCOPE_LABEL: "on"}}}
    for doc in docs:
        admin.apply(doc)
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant-editor", "namespace": namespace},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "llmkube-editor",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        }
    )
    for name in ("hf-token", "registry", "other-team-token"):
        admin.apply(
            {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}
        )
    path = service_account_kubeconfig(
        api_cluster.kubeconfig, namespace, "tenant", tmp_path_factory.mktemp("tenant") / "kubeconfig"
    )
    tenant = KubeRest.from_kubeconfig(path)
    # Policies take effect asynchronously: wait until a bad object is refused.
    import time

    deadline = time.monotonic() + 30
    while True:
        try:
            tenant.request(
                "POST",
                f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/inferenceservices?dryRun=All",
                service("probe", **secret_env("hf-token")),
            )
        except RestError as refused:
            if refused.status == 422 or refused.status == 403:
                break
        if time.monotonic() > deadline:
            raise TimeoutError("the policy never took effect")
        time.sleep(0.2)
    yield namespace, tenant
    admin.delete("v1", "Namespace", namespace)
    for doc in reversed(docs):
        admin.delete(doc["apiVersion"], doc["kind"], doc["metadata"]["name"])


def create(client: KubeRest, namespace: str, body: dict[str, Any]) -> None:
    client.request(
        "POST",
        f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/inferenceservices?dryRun=All",
        body,
    )


@pytest.mark.parametrize("where", sorted(REFERENCES))
def test_a_tenant_without_secret_rights_may_not_name_a_secret(
    scoped: tuple[str, KubeRest], where: str
) -> None:
    namespace, tenant = scoped
    with pytest.raises(RestError) as refused:
        create(tenant, namespace, service(f"ref-{where}", **REFERENCES[where]("hf-token")))
    assert refused.value.status == 403
    body = refused.value.body
    assert isinstance(body, dict) and body.get("reason") == "Forbidden"
    who = f"system:serviceaccount:{namespace}:tenant"
    assert body["message"].endswith(
        f'spec: names Secret "hf-token" in namespace {namespace}, and {who} may not read (get) it: its pods '
        "would hand it to the service"
    )


def test_a_spec_without_secrets_is_not_judged(scoped: tuple[str, KubeRest]) -> None:
    namespace, tenant = scoped
    create(tenant, namespace, service("plain", env=[{"name": "A", "value": "b"}]))


def test_get_on_one_secret_allows_exactly_that_one(
    api_cluster: ClusterHandle, scoped: tuple[str, KubeRest]
) -> None:
    namespace, tenant = scoped
    admin = api_cluster.admin()
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "read-hf-token", "namespace": namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["hf-token"], "verbs": ["get"]}
            ],
        }
    )
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "read-hf-token", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-hf-token"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        }
    )
    try:
        create(tenant, namespace, service("mine", **secret_env("hf-token")))
        with pytest.raises(RestError) as refused:
            create(
                tenant,
                namespace,
                service("theirs", **secret_env("other-team-token"), imagePullSecrets=[{"name": "hf-token"}]),
            )
        message = refused.value.body["message"] if isinstance(refused.value.body, dict) else ""
        assert f'names Secret "other-team-token" in namespace {namespace}, and' in message
        assert '"hf-token"' not in message
    finally:
        admin.delete("rbac.authorization.k8s.io/v1", "RoleBinding", "read-hf-token", namespace)
        admin.delete("rbac.authorization.k8s.io/v1", "Role", "read-hf-token", namespace)


def source_model(name: str, secret: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"source": "s3://bucket/models/m.gguf"}
    if secret is not None:
        spec["sourceSecretRef"] = {"name": secret}
    return {"apiVersion": API, "kind": "Model", "metadata": {"name": name}, "spec": spec}


def create_model(client: KubeRest, namespace: str, body: dict[str, Any]) -> None:
    client.request(
        "POST", f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/models?dryRun=All", body
    )


def test_a_models_source_secret_is_judged_the_same_way(
    api_cluster: ClusterHandle, scoped: tuple[str, KubeRest]
) -> None:
    """A Model's sourceSecretRef goes to the model downloader: its author must be able to read it."""
    namespace, tenant = scoped
    with pytest.raises(RestError) as refused:
        create_model(tenant, namespace, source_model("private", "hf-token"))
    assert refused.value.status == 403
    who = f"system:serviceaccount:{namespace}:tenant"
    body = refused.value.body
    assert isinstance(body, dict) and body["message"].endswith(
        f'spec: names Secret "hf-token" in namespace {namespace}, and {who} may not read (get) it: the model '
        "downloader would fetch with it"
    )
    create_model(tenant, namespace, source_model("public", None))  # no Secret: not judged
    create_model(api_cluster.admin(), namespace, source_model("admin", "other-team-token"))


def test_an_admin_may_name_any(api_cluster: ClusterHandle, scoped: tuple[str, KubeRest]) -> None:
    namespace, _ = scoped
    create(api_cluster.admin(), namespace, service("admin", **secret_env("other-team-token")))


# --- ModelRouters ----------------------------------------------------------------------------------

LOCAL = {"name": "local", "inferenceServiceRef": {"name": "tiny"}}


def router(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ModelRouter",
        "metadata": {"name": name},
        "spec": {"backends": [LOCAL], **spec},
    }


def keyed_backend(secret: str, url: str | None = None) -> dict[str, Any]:
    external: dict[str, Any] = {"provider": "openai", "model": "m", "credentialsSecretRef": {"name": secret}}
    if url is not None:
        external["url"] = url
    return {"name": "cloud", "external": external}


#: every place a ModelRouter names a Secret (plan/router/objects.py mounts each in the router's pod)
ROUTER_REFERENCES = {
    "credentials": lambda secret: {"backends": [LOCAL, keyed_backend(secret)]},
    "api-keys": lambda secret: {"policy": {"apiKeys": {"secretRef": {"name": secret}}}},
    "pull": lambda secret: {"proxy": {"imagePullSecrets": [{"name": secret}]}},
}


def create_router(client: KubeRest, namespace: str, body: dict[str, Any], *, dry_run: bool = True) -> None:
    query = "?dryRun=All" if dry_run else ""
    client.request(
        "POST", f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/modelrouters{query}", body
    )


@pytest.mark.parametrize("where", sorted(ROUTER_REFERENCES))
def test_a_router_may_name_no_secret_its_author_may_not_read(
    scoped: tuple[str, KubeRest], where: str
) -> None:
    namespace, tenant = scoped
    with pytest.raises(RestError) as refused:
        create_router(tenant, namespace, router(f"r-{where}", **ROUTER_REFERENCES[where]("hf-token")))
    assert refused.value.status == 403
    body = refused.value.body
    assert isinstance(body, dict) and body.get("reason") == "Forbidden"
    who = f"system:serviceaccount:{namespace}:tenant"
    assert body["message"].endswith(
        f'spec: names Secret "hf-token" in namespace {namespace}, and {who} may not read (get) it: its '
        "router pods would mount it (and send a provider key to the URL it names)"
    )


def test_a_router_without_secrets_is_not_judged_and_an_admin_may_name_any(
    api_cluster: ClusterHandle, scoped: tuple[str, KubeRest]
) -> None:
    namespace, tenant = scoped
    create_router(tenant, namespace, router("plain"))
    everything = {k: v for make in ROUTER_REFERENCES.values() for k, v in make("other-team-token").items()}
    create_router(api_cluster.admin(), namespace, router("admin", **everything))


def test_a_tenant_editing_an_admins_router_may_not_keep_its_secret(
    api_cluster: ClusterHandle, scoped: tuple[str, KubeRest]
) -> None:
    """The admin's router sends an admin's key to OpenAI; the tenant may edit the router (it holds
    llmkube-editor), but any spec change it makes still names that Secret, so it is refused: it
    cannot point the key at a server of its own. Its metadata-only edits go through."""
    namespace, tenant = scoped
    admin = api_cluster.admin()
    create_router(
        admin, namespace, router("shared", backends=[LOCAL, keyed_backend("other-team-token")]), dry_run=False
    )
    path = f"/apis/inference.llmkube.dev/v1alpha1/namespaces/{namespace}/modelrouters/shared"
    try:
        with pytest.raises(RestError) as refused:
            tenant.request(
                "PATCH",
                path,
                {
                    "spec": {
                        "backends": [LOCAL, keyed_backend("other-team-token", "https://collector.example")]
                    }
                },
                content_type="application/merge-patch+json",
            )
        assert refused.value.status == 403
        assert 'names Secret "other-team-token"' in str(refused.value.body)
        tenant.request(
            "PATCH",
            path,
            {"metadata": {"labels": {"team": "a"}}},
            content_type="application/merge-patch+json",
        )
    finally:
        admin.delete(API, "ModelRouter", "shared", namespace)


# --- many Secrets: each authorizer check is a large part of what CEL may spend ---------------------


def _grant(admin: KubeRest, namespace: str, secrets: list[str]) -> None:
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "read-many", "namespace": namespace},
            "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "resourceNames": secrets, "verbs": ["get"]}
            ],
        }
    )
    admin.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "read-many", "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-many"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        }
    )


def _env(secrets: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": f"S{i}", "valueFrom": {"secretKeyRef": {"name": name, "key": "k"}}}
        for i, name in enumerate(secrets)
    ]


def test_sixteen_secrets_are_judged_one_by_one_and_more_need_every_secret(
    api_cluster: ClusterHandle, scoped: tuple[str, KubeRest]
) -> None:
    """An authorizer check costs 350,000 of the 1,000,000 one CEL expression may spend: one
    expression checking three Secrets ran out of budget, and the API server refused the object for
    everyone, an admin included ("actual cost limit exceeded"). Each Secret is its own check now."""
    namespace, tenant = scoped
    admin = api_cluster.admin()
    many = [f"s-{i:02d}" for i in range(20)]
    _grant(admin, namespace, many[:17])
    try:
        # Named twice over, sixteen distinct: each is checked once.
        create(tenant, namespace, service("sixteen", env=_env(many[:16] + many[:16])))
        with pytest.raises(RestError) as refused:
            create(tenant, namespace, service("seventeen", env=_env(many[:17])))
        assert refused.value.status == 403
        who = f"system:serviceaccount:{namespace}:tenant"
        assert (
            f"spec: names 17 Secrets in namespace {namespace}; {who} may name at most 16 unless it may read "
            "(get) every Secret there"
        ) in str(refused.value.body)
        # One it may not read, the sixteenth: named.
        with pytest.raises(RestError) as refused:
            create(tenant, namespace, service("last-one", env=_env([*many[:15], "other-team-token"])))
        assert 'names Secret "other-team-token" in namespace' in str(refused.value.body)
        # Whoever may read every Secret (an admin) names any number.
        create(admin, namespace, service("admin-twenty", env=_env(many)))
        everything = {k: v for make in ROUTER_REFERENCES.values() for k, v in make("hf-token").items()}
        create_router(admin, namespace, router("admin-three", **everything))
    finally:
        admin.delete("rbac.authorization.k8s.io/v1", "RoleBinding", "read-many", namespace)
        admin.delete("rbac.authorization.k8s.io/v1", "Role", "read-many", namespace)
