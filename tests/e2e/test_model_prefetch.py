"""A Model's prefetch on the full tier (the real Job controller; kwok completes the Job's pod):
`prefetch: true` creates a Job owned by the Model, hardened as the inference pods are (the
namespace enforces Pod Security restricted, so the Job controller's pod is admitted only if it
meets it), mounting the namespace's model cache claim, which the Model controller creates when
no service has yet; the Model turns Ready (reason
ModelPrefetched) with its cache key once the Job completed; a changed spec replaces the Job, and
`prefetch: false` deletes it. A Job whose pod the API server refuses (a quota of no pods, a
LimitRange below its limits) leaves nothing in the Job's status: the Model says why, from the Job's
FailedCreate Event, until the pod exists."""

import time
from typing import Any

import pytest
from e2e_support import RunningController, condition_triple, eventually, isvc, model, patch, status_of
from llmkube_testing.pytest_plugin import ClusterHandle
from usercli_support import llmkube, row_of

from llmkube.plan.model.downloader import NAME as DOWNLOADER
from llmkube.plan.model.prefetch import CACHE_CLAIM, LABEL_PREFETCH
from llmkube.plan.model.source import cache_key

RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def jobs(admin: Any, namespace: str) -> list[dict[str, Any]]:
    return [
        j
        for j in admin.list("batch/v1", "Job", namespace)
        if LABEL_PREFETCH in j["metadata"].get("labels", {})
    ]


async def test_prefetch_runs_a_hardened_job_into_the_cache_and_the_model_turns_ready(
    operator: RunningController, full_namespace: str
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    patch(admin, "v1", "Namespace", ns, None, {"metadata": {"labels": RESTRICTED}})
    source = "https://models.invalid/early.gguf"
    created = admin.create(model("early", source, prefetch=True), namespace=ns)

    [job] = await eventually(lambda: jobs(admin, ns), what="the prefetch Job")
    assert job["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["name"] == DOWNLOADER
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["automountServiceAccountToken"] is False
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert {
        v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v
    } == {CACHE_CLAIM}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["CACHE_DIR"] == f"/models/{cache_key(source)}"
    # No service uses the cache yet: the Model controller made the claim the Job mounts.
    assert admin.get_or_none("v1", "PersistentVolumeClaim", CACHE_CLAIM, ns) is not None

    # The Job controller's pod is admitted under "restricted", kwok completes it, the Job is Complete.
    def ready() -> dict[str, Any] | None:
        status = status_of(admin, "Model", "early", ns)
        return status if status.get("phase") == "Ready" else None

    status = await eventually(ready, within=90, what="the Model Ready after its prefetch")
    assert condition_triple(status, "Available")[:2] == ("True", "ModelPrefetched")  # type: ignore[index]
    assert status["cacheKey"] == cache_key(source)

    # Another source: a new Job (its name carries what it fetches), the old one deleted.
    patch(
        admin, "inference.llmkube.dev/v1alpha1", "Model", "early", ns, {"spec": {"source": source + "?v=2"}}
    )

    def replaced() -> list[dict[str, Any]] | None:
        found = jobs(admin, ns)
        names = [j["metadata"]["name"] for j in found]
        return found if names and job["metadata"]["name"] not in names else None

    await eventually(replaced, what="the Job of the new spec, the old one gone")
    # prefetch: false: no Job is left.
    patch(admin, "inference.llmkube.dev/v1alpha1", "Model", "early", ns, {"spec": {"prefetch": False}})
    await eventually(lambda: not jobs(admin, ns), what="the prefetch Job deleted")


async def test_cache_preload_and_list_from_the_command_line(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    """`llmkube cache preload` sets prefetch; `llmkube cache list` shows the Model's cache entry
    as the controller recorded it, with the services that use it."""
    admin, kc, ns = operator.cluster.admin(), full_cluster.kubeconfig, full_namespace
    source = "https://models.invalid/cached.gguf"
    admin.create(model("cached", source), namespace=ns)
    admin.create(isvc("web", modelRef="cached"), namespace=ns)

    preloaded = await llmkube(kc, "cache", "preload", "cached", "-n", ns)
    assert preloaded.code == 0, preloaded.text
    assert '"cached" is prefetched' in preloaded.out
    assert admin.get("inference.llmkube.dev/v1alpha1", "Model", "cached", ns)["spec"]["prefetch"] is True

    def prefetched() -> dict[str, Any] | None:
        status = status_of(admin, "Model", "cached", ns)
        available = condition_triple(status, "Available")
        return status if available is not None and available[1] == "ModelPrefetched" else None

    await eventually(prefetched, within=90, what="the Model prefetched")
    listed = await llmkube(kc, "cache", "list", "-n", ns)
    assert listed.code == 0, listed.text
    row = row_of(listed.out, "cached")
    assert (row["STATE"], row["CACHE KEY"], row["FILES"], row["USED BY"]) == (
        "Ready",
        cache_key(source),
        "1",
        "web",
    )

    missing = await llmkube(kc, "cache", "preload", "no-such-model", "-n", ns)
    assert missing.code != 0 and "not found" in missing.err


def model_warnings(admin: Any, namespace: str, name: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e.get("note", ""))
        for e in admin.list("events.k8s.io/v1", "Event", namespace)
        if e.get("type") == "Warning"
        and (e.get("regarding") or {}).get("kind") == "Model"
        and e["regarding"]["name"] == name
    ]


#: What can refuse a prefetch Job its pod, as the API server's admission does: (kind, object, the
#: words of its refusal, whether its status must be filled in before it holds).
REFUSERS: dict[str, tuple[str, dict[str, Any], str, bool]] = {
    # The quota controller must have counted the namespace before the Job's pod is tried, or the
    # pod could slip in before the quota holds (its status.hard is the sign).
    "quota": ("ResourceQuota", {"hard": {"pods": "0"}}, "exceeded quota: refuser", True),
    # The downloader's container is limited to 512Mi: above what this LimitRange allows.
    "limit-range": (
        "LimitRange",
        {"limits": [{"type": "Container", "max": {"memory": "256Mi"}}]},
        "maximum memory usage per Container is 256Mi",
        False,
    ),
}


@pytest.mark.parametrize("refuser", sorted(REFUSERS))
async def test_a_prefetch_job_that_cannot_create_its_pod_says_why_until_the_refusal_goes(
    operator: RunningController, full_namespace: str, refuser: str
) -> None:
    admin, ns = operator.cluster.admin(), full_namespace
    kind, spec, words, counted = REFUSERS[refuser]
    admin.create(
        {"apiVersion": "v1", "kind": kind, "metadata": {"name": "refuser"}, "spec": spec}, namespace=ns
    )
    if counted:
        await eventually(
            lambda: (admin.get("v1", kind, "refuser", ns).get("status") or {}).get("hard"),
            what="the quota in force",
        )
    admin.create(model("held", "https://models.invalid/held.gguf", prefetch=True), namespace=ns)
    [job] = await eventually(lambda: jobs(admin, ns), what="the prefetch Job")
    name = job["metadata"]["name"]

    def refused() -> tuple[str, str, str] | None:
        status = status_of(admin, "Model", "held", ns)
        ready = condition_triple(status, "Ready")
        return ready if ready is not None and ready[1] == "PrefetchPodNotCreated" else None

    ready = await eventually(refused, within=90, what="the Model saying why the Job has no pod")
    status = status_of(admin, "Model", "held", ns)
    assert status["phase"] == "Downloading" and ready[0] == "False"
    progressing = condition_triple(status, "Progressing")
    assert progressing is not None and progressing[:2] == ("True", "PrefetchPodNotCreated")
    # The API server's own words (the admission plugin's refusal), behind the Job's name.
    assert f'Prefetch Job "{name}" cannot create its pod: ' in ready[2]
    assert words in ready[2], ready[2]
    [job] = jobs(admin, ns)  # as it is now: the Job controller counts no pod, and none exists
    assert admin.list("v1", "Pod", ns) == [] and not (job.get("status") or {}).get("active")
    warnings = await eventually(
        lambda: [w for w in model_warnings(admin, ns, "held") if w[0] == "PrefetchPodNotCreated"],
        what="the Warning Event on the Model",
    )
    assert words in warnings[0][1]

    started = time.monotonic()
    admin.delete("v1", kind, "refuser", ns)

    def prefetched() -> dict[str, Any] | None:
        status = status_of(admin, "Model", "held", ns)
        return status if status.get("phase") == "Ready" else None

    # The Job controller tries again with its own backoff (at most a minute), kwok completes the pod.
    status = await eventually(prefetched, within=150, what="the Model Ready once the refusal is gone")
    took = time.monotonic() - started
    assert condition_triple(status, "Available")[:2] == ("True", "ModelPrefetched")  # type: ignore[index]
    assert words not in str(status["conditions"])  # the words went with the refusal
    [done] = jobs(admin, ns)
    assert done["metadata"]["name"] == name and (done.get("status") or {}).get("succeeded") == 1
    print(f"{kind} deleted -> Model Ready: {took:.1f} s")
