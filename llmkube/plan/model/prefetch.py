"""A Model's prefetch: a Job, owned by the Model, that downloads its files into the namespace's
model cache claim before any InferenceService needs them (`spec.prefetch: true`).

The Job's pod runs the model downloader (plan/model/downloader.py) with the very environment the
inference pods' init container gets, at the same place in the same claim, so the first serving
pod finds every file there (its log says `cache hit`). It is hardened like the inference pods
(Pod Security restricted: a non-root user, RuntimeDefault seccomp, no capabilities, a read-only
root, no ServiceAccount token) and retried by the Job controller with its exponential backoff,
except for a failure that will not fix itself (a refused request, a checksum mismatch: exit code
3), which fails the Job at once (its podFailurePolicy).

A Job is never changed: its name carries a digest of what it fetches (the source, the files, the
checksum and, with refreshPolicy OnChange, the fingerprint of the upstream files), so a new spec
or a changed upstream gets a new Job and the old one is deleted. A finished Job stays (its pod's
log with it) until then; deleting a failed one makes the controller try again.
"""

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llmkube.api import constants as c
from llmkube.api.base import KubeObject
from llmkube.api.model import Model, ModelStatus
from llmkube.plan.model.decision import ModelPlanConfig
from llmkube.plan.model.download_scripts import EXIT_PERMANENT
from llmkube.plan.model.downloader import (
    MODELS_MOUNT,
    NAME,
    DownloadTarget,
    ca_mount,
    ca_volume,
    download_env,
    downloader_container,
    identity_mount,
    identity_volume,
    secret_env_from,
)
from llmkube.plan.model.remote import RemoteSource

#: The namespace's model cache claim (the one the inference pods mount).
CACHE_CLAIM = "llmkube-model-cache"
LABEL_PREFETCH = f"{c.GROUP}/prefetch"  # on the Job and its pods: the digest of what it fetches
COMPONENT = "model-prefetch"
#: The user and group it runs as: the inference pods' (plan/inferenceservice/hardening.py), so
#: the files it writes are theirs.
PREFETCH_USER = 65532
#: Pods the Job controller starts for passing failures before it gives up (with its backoff:
#: 10 s, 20 s, 40 s, ...).
BACKOFF_LIMIT = 4
_MAX_JOB_NAME = 63  # the Job controller puts the name into a label of its pods
_SUFFIX = "-prefetch-"
_DIGEST = 8
#: The reason of the Event the Job controller emits on the Job when the API server refuses the
#: pod it tried to create (a ResourceQuota, a LimitRange, Pod Security admission): Kubernetes
#: writes nothing of it into the Job's status.
FAILED_CREATE = "FailedCreate"
#: The Job controller's count of its pods that exist and have not finished.
_LIVE_COUNTS = ("active", "ready", "terminating")
_FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
_EPOCH = datetime.min.replace(tzinfo=UTC)
_DONE = re.compile(r"done: (?P<files>\d+) files, (?P<bytes>\d+) bytes")
_PROGRESS = re.compile(r"^llmkube-download: (?P<got>\d+)(?: of (?P<total>\d+))? bytes")


@dataclass(frozen=True)
class PrefetchResult:
    files: int
    bytes: int


def prefetch_digest(model: Model, remote: RemoteSource, status: ModelStatus) -> str:
    """What the Job fetches, as 16 hex characters: a different value is a different Job."""
    spec = model.spec
    parts: dict[str, object] = {
        "source": spec.source,
        "files": [[file.dest, file.location] for file in remote.files],
        "sha256": (spec.sha256 or "").lower(),
        "secret": remote.secret,
    }
    if spec.refresh_policy == "OnChange":
        parts["upstream"] = [status.source_e_tag or "", status.source_content_length or 0]
    encoded = json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def prefetch_job_name(model_name: str, digest: str) -> str:
    stem = model_name[: _MAX_JOB_NAME - len(_SUFFIX) - _DIGEST].rstrip("-.")
    return f"{stem}{_SUFFIX}{digest[:_DIGEST]}"


def owner_reference(model: Model) -> KubeObject:
    """The Model as the controller of a Job it owns (the Job goes with it)."""
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.MODEL_KIND,
        "name": model.metadata.name or "",
        "uid": model.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": False,
    }


#: The downloader's container hardening, which the cache-clear Job's container shares.
CONTAINER_SECURITY: KubeObject = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
}


def model_job(
    model: Model,
    *,
    name: str,
    labels: Mapping[str, str],
    pod_labels: Mapping[str, str],
    container: KubeObject,
    volumes: list[KubeObject],
    permanent_exit: int,
    config: ModelPlanConfig,
) -> KubeObject:
    """A Job owned by the Model, its pod hardened like the inference pods (Pod Security
    restricted: a non-root user, RuntimeDefault seccomp, no ServiceAccount token), retried by the
    Job controller except when `container` exits with `permanent_exit`. The prefetch and the cache
    clear are both this Job."""
    pod_security: KubeObject = {
        "runAsNonRoot": True,
        "runAsUser": PREFETCH_USER,
        "runAsGroup": PREFETCH_USER,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    if config.default_fsgroup > 0:
        pod_security["fsGroup"] = config.default_fsgroup
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": model.metadata.namespace or "",
            "labels": dict(labels),
            "ownerReferences": [owner_reference(model)],
        },
        "spec": {
            "backoffLimit": BACKOFF_LIMIT,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": container["name"],
                            "operator": "In",
                            "values": [permanent_exit],
                        },
                    }
                ]
            },
            "template": {
                "metadata": {"labels": dict(pod_labels)},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "securityContext": pod_security,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def prefetch_job(
    model: Model, remote: RemoteSource, digest: str, cache_key: str, config: ModelPlanConfig
) -> KubeObject:
    name = prefetch_job_name(model.metadata.name or "", digest)
    labels = {
        c.LABEL_NAME: "llmkube",
        c.LABEL_COMPONENT: COMPONENT,
        c.LABEL_MANAGED_BY: c.MANAGED_BY_VALUE,
        LABEL_PREFETCH: digest,
    }
    target = DownloadTarget(
        remote=remote,
        source=model.spec.source,
        cache_dir=f"{MODELS_MOUNT}/{cache_key}",
        sha256=model.spec.sha256,
        on_change=model.spec.refresh_policy == "OnChange",
        hf_endpoint=config.hf_endpoint,
        proxy=config.download_proxy,
    )
    volumes: list[KubeObject] = [{"name": "model-cache", "persistentVolumeClaim": {"claimName": CACHE_CLAIM}}]
    mounts: list[KubeObject] = [{"name": "model-cache", "mountPath": MODELS_MOUNT}]
    if config.ca_cert_configmap:
        volumes.append(ca_volume(config.ca_cert_configmap))
        mounts.append(ca_mount())
    volumes += identity_volume(remote)
    mounts += identity_mount(remote)
    container = downloader_container(
        image=config.downloader_image,
        env=download_env(target),
        env_from=secret_env_from(remote),
        mounts=mounts,
        security_context=dict(CONTAINER_SECURITY),
        custom_ca=bool(config.ca_cert_configmap),
    )
    return model_job(
        model,
        name=name,
        labels=labels,
        pod_labels={LABEL_PREFETCH: digest},
        container=container,
        volumes=volumes,
        permanent_exit=EXIT_PERMANENT,
        config=config,
    )


def progress_of(log_tail: str | None) -> tuple[int | None, int | None]:
    """(bytes so far, bytes in all) from the downloader's last progress line; (None, None) before
    its first one. A total of 0 (sizes unknown) is None."""
    for line in reversed((log_tail or "").splitlines()):
        match = _PROGRESS.match(line.strip())
        if match:
            total = int(match["total"]) if match["total"] else 0
            return int(match["got"]), total or None
    return None, None


def _finished_at(status: Mapping[str, Any]) -> str:
    return str(((status.get("state") or {}).get("terminated") or {}).get("finishedAt") or "")


def downloader_words(pods: Iterable[Mapping[str, Any]]) -> str:
    """The last words of the Job's latest finished downloader (its termination message: the
    downloader's last line, e.g. `llmkube-download: failed: m.gguf from s3://b/m: HTTP 403
    InvalidAccessKeyId: ...`), or "" when none finished with one."""
    finished = [
        status
        for pod in pods
        for status in (pod.get("status") or {}).get("containerStatuses") or ()
        if status.get("name") == NAME and "terminated" in (status.get("state") or {})
    ]
    for status in sorted(finished, key=_finished_at, reverse=True):
        message = str((status["state"]["terminated"] or {}).get("message") or "").strip()
        if message:
            return message.splitlines()[-1][:500]
    return ""


def running_downloader(pods: Iterable[Mapping[str, Any]]) -> str | None:
    """The name of a pod of the Job whose downloader runs now, if any."""
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or ():
            if status.get("name") == NAME and "running" in (status.get("state") or {}):
                return str((pod.get("metadata") or {}).get("name") or "") or None
    return None


def prefetch_result(message: str) -> PrefetchResult | None:
    """The downloader's last line (`done: 3 files, 12345 bytes in ...`) as numbers."""
    match = _DONE.search(message or "")
    if match is None:
        return None
    return PrefetchResult(files=int(match["files"]), bytes=int(match["bytes"]))


def _when(text: object) -> datetime:
    try:
        when = datetime.fromisoformat(str(text))
    except ValueError:
        return _EPOCH
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _event_time(event: Mapping[str, Any]) -> datetime:
    """When an Event (events.k8s.io/v1) last happened: its series' last observation, the core
    Event's lastTimestamp (the Job controller's recorder writes those), its eventTime, its creation."""
    series = event.get("series") or {}
    for value in (
        series.get("lastObservedTime"),
        event.get("deprecatedLastTimestamp"),
        event.get("eventTime"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        if value:
            return _when(value)
    return _EPOCH


def awaits_its_pod(job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a Job has no pod that exists and has not finished (its pods as the cache shows
    them, and the Job controller's own counts): only then can a refusal explain why nothing runs."""
    status = job.get("status") or {}
    if any(int(status.get(count) or 0) > 0 for count in _LIVE_COUNTS):
        return False
    return all((pod.get("status") or {}).get("phase") in _FINISHED_PHASES for pod in pods)


def pod_refusal(
    job: Mapping[str, Any], pods: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]]
) -> str:
    """Why the Job has no pod, in the API server's words: the note of the latest FailedCreate
    Event about this Job (by uid, decided on the Event's reason, never its text) that is newer
    than every pod the Job had; "" while a pod exists or nothing was refused."""
    pods = list(pods)
    if not awaits_its_pod(job, pods):
        return ""
    uid = (job.get("metadata") or {}).get("uid")
    newest_pod = max(
        (_when((pod.get("metadata") or {}).get("creationTimestamp")) for pod in pods), default=_EPOCH
    )
    refusals = [
        event
        for event in events
        if event.get("reason") == FAILED_CREATE
        and (event.get("regarding") or {}).get("uid") == uid
        and _event_time(event) >= newest_pod
    ]
    if not refusals:
        return ""
    note = str(max(refusals, key=_event_time).get("note") or "").strip()
    return note.splitlines()[0][:500] if note else ""
