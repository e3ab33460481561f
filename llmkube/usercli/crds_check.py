"""Whether the cluster serves llmkube's kinds: a command that met a 404 asks discovery once, so
that missing CRDs are said as such, not as a missing object (`creating Model "x" not found`)."""

from llmkube.api import constants as c
from llmkube.kube.errors import ApiError, NotFound
from llmkube.kube.types import Obj
from llmkube.usercli.session import Session

GROUP_VERSION = f"{c.GROUP}/{c.VERSION}"
#: the kinds the user commands read and write
NEEDED = (c.MODEL_PLURAL, c.ISVC_PLURAL)


def missing_plurals(discovery: Obj | None) -> list[str]:
    """The needed kinds the group's discovery document does not list (all of them without one)."""
    served = {str(resource.get("name")) for resource in (discovery or {}).get("resources") or []}
    return [plural for plural in NEEDED if plural not in served]


def crds_not_installed(server: str, context: str | None, missing: list[str]) -> str:
    where = f"the cluster at {server}" + (f" (context {context})" if context else "")
    return (
        f"the llmkube CRDs are not installed in {where}: it serves no {', '.join(missing)} of "
        f"{GROUP_VERSION}. Install llmkube first: helm install llmkube charts/llmkube -n llmkube-system "
        "--create-namespace, or kubectl apply --server-side -k manifests/ (docs/install.md)"
    )


async def missing_crds(session: Session) -> list[str]:
    """The needed kinds the cluster does not serve; empty when it serves them or cannot say (any
    other answer than the group's document or its 404 leaves the first error to stand)."""
    try:
        discovery: Obj = await session.client.request("GET", f"/apis/{GROUP_VERSION}")
    except NotFound:
        return list(NEEDED)
    except ApiError:
        return []
    return missing_plurals(discovery)
