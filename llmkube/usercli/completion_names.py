"""What the completion scripts offer after `-n` and `--context`: the cluster's namespaces (those the
user may list; none when refused) and the kubeconfig's contexts (read from the file, no cluster)."""

import argparse
import sys

from llmkube.kube.errors import ApiError
from llmkube.kube.resource import Resource
from llmkube.kube.rest.config import ConfigError, kubeconfig_paths, read_kubeconfigs
from llmkube.usercli.session import Session

NAMESPACES = Resource("", "v1", "namespaces", "Namespace")


def context_names(kubeconfig: str | None) -> list[str]:
    try:
        merged = read_kubeconfigs(kubeconfig_paths(kubeconfig))
    except (ConfigError, OSError, ValueError):
        return []
    contexts = merged.get("contexts") or []
    names = (
        [str(c.get("name")) for c in contexts if isinstance(c, dict) and c.get("name")]
        if isinstance(contexts, list)
        else []
    )
    return sorted(set(names))


def run_contexts(args: argparse.Namespace) -> int:
    sys.stdout.write(" ".join(context_names(getattr(args, "kubeconfig", None))) + "\n")
    return 0


async def run_namespaces(session: Session, _: argparse.Namespace) -> int:
    try:
        found = await session.client.list_all(NAMESPACES)
    except ApiError:
        found = []  # not allowed to list them: the current one is still a good guess
    names = sorted(
        {str((n.get("metadata") or {}).get("name") or "") for n in found} - {""} | {session.namespace}
    )
    sys.stdout.write(" ".join(names) + "\n")
    return 0
