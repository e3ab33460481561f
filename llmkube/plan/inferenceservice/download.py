"""A model download in progress, as the service's status shows it (pure).

The model-downloader init container prints `llmkube-download: <bytes> of <total> bytes (<n>%)`
every few seconds (plan/inferenceservice/init_scripts.py). While a pod of the service runs that container, the
controller reads the last lines of its log and the status says how far it got, instead of
"No replica is ready yet".
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from llmkube.plan.inferenceservice.storage import INIT_CONTAINER_NAME
from llmkube.plan.model.size import format_size

# Re-plan this often while a download runs, so the figures in status move.
DOWNLOAD_REQUEUE_SECONDS = 10.0
DOWNLOADING = "Downloading"
_LINE = re.compile(r"^llmkube-download: (?P<got>\d+)(?: of (?P<total>\d+))? bytes")


@dataclass(frozen=True)
class Download:
    pod: str
    received: int | None = None
    total: int | None = None

    def message(self) -> str:
        if self.received is None:
            return f"Downloading the model (pod {self.pod})"
        if self.total:
            percent = min(100, self.received * 100 // self.total)
            got, total = format_size(self.received), format_size(self.total)
            return f"Downloading the model: {got} of {total} ({percent}%)"
        return f"Downloading the model: {format_size(self.received)} so far"


def downloading_pod(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """The name of a pod whose model-downloader init container is running, if any."""
    for pod in pods:
        for status in (pod.get("status") or {}).get("initContainerStatuses") or ():
            if status.get("name") == INIT_CONTAINER_NAME and "running" in (status.get("state") or {}):
                return str((pod.get("metadata") or {}).get("name") or "")
    return None


def download_progress(pod: str, log_tail: str | None) -> Download:
    """The last progress line of the downloader's log (absent: just "downloading")."""
    for line in reversed((log_tail or "").splitlines()):
        match = _LINE.match(line.strip())
        if match:
            total = int(match["total"]) if match["total"] else None
            return Download(pod, int(match["got"]), total or None)
    return Download(pod)
