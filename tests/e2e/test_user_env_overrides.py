"""A user env var named like one the runtime generates (vLLM/PersonaPlex `HF_TOKEN` from
`hfTokenSecretRef`, TGI's `HUGGING_FACE_HUB_TOKEN`, PersonaPlex's `NO_TORCH_COMPILE`) replaces the
generated one: the container gets exactly one entry of that name, the user's. Before, both entries
were applied and the API server refused the Deployment ("duplicate entries for key")."""

from typing import Any

import pytest
from e2e_support import (
    RunningController,
    eventually,
    hf_model,
    isvc,
    patch_isvc,
    phase_is,
    services_deleted_first,  # noqa: F401  (a fixture)
)

pytestmark = pytest.mark.usefixtures("services_deleted_first")

TOKEN_REF = {"name": "hf-secret", "key": "token"}


def env_of(admin: Any, name: str, namespace: str) -> list[dict[str, Any]]:
    deployment = admin.get_or_none("apps/v1", "Deployment", name, namespace)
    if deployment is None:
        return []
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container.get("env") or [])


@pytest.mark.parametrize(
    ("runtime", "extra", "user_env"),
    [
        pytest.param(
            "vllm",
            {"vllmConfig": {"hfTokenSecretRef": TOKEN_REF}},
            {"name": "HF_TOKEN", "value": "from-the-user"},
            id="vllm-HF_TOKEN",
        ),
        pytest.param(
            "tgi",
            {"tgiConfig": {"hfTokenSecretRef": TOKEN_REF}},
            {"name": "HUGGING_FACE_HUB_TOKEN", "valueFrom": {"secretKeyRef": {"name": "mine", "key": "t"}}},
            id="tgi-HUGGING_FACE_HUB_TOKEN",
        ),
        pytest.param(
            "personaplex",
            {"image": "registry.invalid/personaplex:1"},
            {"name": "NO_TORCH_COMPILE", "value": "0"},
            id="personaplex-NO_TORCH_COMPILE",
        ),
    ],
)
async def test_a_user_env_var_replaces_the_generated_one_of_the_same_name(
    operator: RunningController,
    full_namespace: str,
    runtime: str,
    extra: dict[str, Any],
    user_env: dict[str, Any],
) -> None:
    admin = operator.cluster.admin()
    ns = full_namespace
    admin.create(hf_model("m"), namespace=ns)
    other = {"name": "OTHER", "value": "kept"}
    admin.create(
        isvc("gen", modelRef="m", skipModelInit=True, runtime=runtime, env=[user_env, other], **extra),
        namespace=ns,
    )
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen Ready")
    env = env_of(admin, "gen", ns)
    names = [var["name"] for var in env]
    assert len(names) == len(set(names)), names
    assert user_env in env and other in env
    # The user's entries come after the generated ones that remain (a $(VAR) of theirs can use ours).
    assert env[-2:] == [user_env, other]

    # A running service gains the colliding name later: it converges too (a transition, not only a
    # fresh state), and loses it again: the generated entry comes back.
    patch_isvc(admin, "gen", ns, {"env": [other]})
    await eventually(lambda: user_env not in env_of(admin, "gen", ns), what="the user's entry gone")
    generated = [var for var in env_of(admin, "gen", ns) if var["name"] == user_env["name"]]
    assert len(generated) == 1 and generated[0] != user_env
    patch_isvc(admin, "gen", ns, {"env": [other, user_env]})
    await eventually(lambda: user_env in env_of(admin, "gen", ns), what="the user's entry back")
    names = [var["name"] for var in env_of(admin, "gen", ns)]
    assert names.count(user_env["name"]) == 1
    await eventually(phase_is(admin, "InferenceService", "gen", ns, "Ready"), what="gen Ready at the end")
