"""`llmkube cache clear` and `llmkube deploy ID` on the full tier (the real Job controller; kwok
completes the Job's pod): a clear refused in one line while a service names the Model, then forced:
the Model controller runs a hardened Job it owns on the namespace's cache claim (the namespace
enforces Pod Security restricted), records Cleared in status.cacheClear and deletes the Job, and
`cache list` shows it; a catalog id deploys its Model and service, and a server dry run creates
nothing."""

from typing import Any

import yaml
from e2e_support import (
    RunningController,
    eventually,
    isvc,
    model,
    patch,
    poll,
    restarted_controller,
    settled,
    status_of,
)
from llmkube_testing.controller_harness import reconcile_log
from llmkube_testing.pytest_plugin import ClusterHandle
from usercli_support import llmkube, row_of

from llmkube.kube.types import ObjectKey
from llmkube.plan.model.cache_clear import CLEAR_ANNOTATION, COMPONENT, CONTAINER, clear_job_name
from llmkube.plan.model.prefetch import CACHE_CLAIM
from llmkube.plan.model.prefetch import COMPONENT as PREFETCH_COMPONENT
from llmkube.plan.model.source import cache_key

API = "inference.llmkube.dev/v1alpha1"
RESTRICTED = {"pod-security.kubernetes.io/enforce": "restricted"}


def jobs(admin: Any, namespace: str, component: str) -> list[dict[str, Any]]:
    return [
        j
        for j in admin.list("batch/v1", "Job", namespace)
        if j["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
    ]


async def test_cache_clear_refuses_while_used_then_clears_through_a_job(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    admin, kc, ns = operator.cluster.admin(), full_cluster.kubeconfig, full_namespace
    patch(admin, "v1", "Namespace", ns, None, {"metadata": {"labels": RESTRICTED}})
    source = "https://models.invalid/clear-me.gguf"
    admin.create(model("clear-me", source, prefetch=True), namespace=ns)
    admin.create(isvc("web", modelRef="clear-me"), namespace=ns)

    def prefetched() -> dict[str, Any] | None:
        status = status_of(admin, "Model", "clear-me", ns)
        return status if status.get("phase") == "Ready" and jobs(admin, ns, PREFETCH_COMPONENT) else None

    await eventually(prefetched, within=90, what="the Model prefetched into the cache claim")
    assert admin.get_or_none("v1", "PersistentVolumeClaim", CACHE_CLAIM, ns) is not None

    refused = await llmkube(kc, "cache", "clear", "clear-me", "-n", ns)
    assert (refused.code, refused.out) == (1, ""), refused.text
    assert refused.err == (
        f'error: Model "clear-me" in namespace "{ns}" is not cleared: InferenceServices use it (web): '
        "clear it with --force, or delete them first\n"
    )
    stored = admin.get(API, "Model", "clear-me", ns)
    assert CLEAR_ANNOTATION not in (stored["metadata"].get("annotations") or {})

    missing = await llmkube(kc, "cache", "clear", "no-such-model", "-n", ns)
    assert (
        missing.code == 1 and missing.err == f'error: Model "no-such-model" in namespace "{ns}" not found\n'
    )

    # Forced: the Job runs under "restricted", kwok completes it, the controller records Cleared.
    cleared = await llmkube(kc, "cache", "clear", "clear-me", "--force", "-n", ns, within=150)
    assert cleared.code == 0, cleared.text
    assert '"clear-me": spec.prefetch set to false' in cleared.out
    assert f'"clear-me" cleared: the files of cache key {cache_key(source)} were removed' in cleared.out
    status = status_of(admin, "Model", "clear-me", ns)
    record = status["cacheClear"]
    assert (record["phase"], record["cacheKey"]) == ("Cleared", cache_key(source))
    assert (
        record["request"]
        == admin.get(API, "Model", "clear-me", ns)["metadata"]["annotations"][CLEAR_ANNOTATION]
    )
    assert admin.get(API, "Model", "clear-me", ns)["spec"]["prefetch"] is False
    # The Job's pod was what the namespace admits; the Job it ran is deleted once recorded, and the
    # prefetch Job went before it.
    events = [
        e
        for e in admin.list("v1", "Event", ns)
        if e["involvedObject"].get("name", "").startswith("clear-me-cache-clear-")
    ]
    assert any(e["reason"] == "SuccessfulCreate" for e in events), events
    await eventually(lambda: not jobs(admin, ns, COMPONENT), what="the clear Job deleted")
    assert not jobs(admin, ns, PREFETCH_COMPONENT)

    listed = await llmkube(kc, "cache", "list", "-n", ns)
    row = row_of(listed.out, "clear-me")
    assert (row["STATE"], row["FILES"], row["SIZE"], row["USED BY"]) == ("Cleared", "-", "-", "web")


async def test_a_clear_job_is_hardened_and_owned_by_the_model(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    """Asked with kubectl's annotate alone (no CLI), the Job as the cluster has it: held while a
    quota of no pods keeps its pod from being created (kwok completes a Job's pod at once)."""
    admin, ns = operator.cluster.admin(), full_namespace
    created = admin.create(model("plain", "https://models.invalid/plain.gguf", prefetch=True), namespace=ns)
    await eventually(
        lambda: status_of(admin, "Model", "plain", ns).get("phase") == "Ready", within=90, what="prefetched"
    )
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }
    admin.create(quota, namespace=ns)
    asked = {"metadata": {"annotations": {CLEAR_ANNOTATION: "by-hand"}}, "spec": {"prefetch": False}}
    patch(admin, API, "Model", "plain", ns, asked)
    [job] = await eventually(lambda: jobs(admin, ns, COMPONENT), what="the clear Job")
    assert job["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["name"] == CONTAINER and container["securityContext"]["capabilities"] == {
        "drop": ["ALL"]
    }
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False and pod["securityContext"]["runAsNonRoot"] is True
    assert {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"]} == {CACHE_CLAIM}
    record = status_of(admin, "Model", "plain", ns)["cacheClear"]
    assert (record["request"], record["phase"], record["job"]) == (
        "by-hand",
        "Clearing",
        job["metadata"]["name"],
    )
    admin.delete("v1", "ResourceQuota", "no-pods", ns)

    def answered() -> dict[str, Any] | None:
        record = status_of(admin, "Model", "plain", ns).get("cacheClear") or {}
        return record if record.get("request") == "by-hand" and record.get("phase") == "Cleared" else None

    await eventually(answered, within=90, what="the clear recorded")
    reasons = {
        e["reason"] for e in admin.list("v1", "Event", ns) if e["involvedObject"].get("name") == "plain"
    }
    assert {"CacheClearing", "CacheCleared"} <= reasons


def answer_to(admin: Any, name: str, namespace: str, request: str) -> Any:
    """A check for `eventually`: the Model's cacheClear once it is about `request`."""

    def check() -> dict[str, Any] | None:
        record = status_of(admin, "Model", name, namespace).get("cacheClear") or {}
        return record if record.get("request") == request else None

    return check


def clear_reasons(admin: Any, namespace: str, name: str) -> list[str]:
    return [
        e["reason"]
        for e in admin.list("v1", "Event", namespace)
        if e["involvedObject"].get("name") == name and e["reason"].startswith("Cache")
    ]


async def test_a_clear_refused_under_a_service_then_carried_out_once_it_is_deleted(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    """The annotation alone (kubectl annotate: no generation bump) on a Model a running service
    names: refused, no Job. The service deleted, `cache clear` right after (not forced): cleared,
    although the controller's cache of services may not have seen the deletion yet when the request
    reaches it (it reads the services again before it refuses)."""
    admin, kc, ns = operator.cluster.admin(), full_cluster.kubeconfig, full_namespace
    source = "https://models.invalid/in-use.gguf"
    admin.create(model("in-use", source, prefetch=True), namespace=ns)
    admin.create(isvc("web", modelRef="in-use"), namespace=ns)
    await eventually(
        lambda: (
            status_of(admin, "Model", "in-use", ns).get("phase") == "Ready"
            and jobs(admin, ns, PREFETCH_COMPONENT)
        ),
        within=90,
        what="the Model prefetched",
    )
    generation = admin.get(API, "Model", "in-use", ns)["metadata"]["generation"]
    patch(admin, API, "Model", "in-use", ns, {"metadata": {"annotations": {CLEAR_ANNOTATION: "by-hand"}}})
    assert admin.get(API, "Model", "in-use", ns)["metadata"]["generation"] == generation

    refused = await eventually(answer_to(admin, "in-use", ns, "by-hand"), what="the annotation answered")
    assert (refused["phase"], refused["cacheKey"]) == ("Refused", cache_key(source))
    assert refused["message"] == "InferenceServices use it (web): clear it with --force, or delete them first"
    assert "job" not in refused and not jobs(admin, ns, COMPONENT)
    await eventually(lambda: clear_reasons(admin, ns, "in-use") == ["CacheClearRefused"], what="its Event")

    admin.delete(API, "InferenceService", "web", ns)
    await eventually(lambda: admin.get_or_none(API, "InferenceService", "web", ns) is None, what="web gone")
    cleared = await llmkube(kc, "cache", "clear", "in-use", "-n", ns, within=150)
    assert cleared.code == 0, cleared.text
    assert f'"in-use" cleared: the files of cache key {cache_key(source)} were removed' in cleared.out
    record = status_of(admin, "Model", "in-use", ns)["cacheClear"]
    assert record["phase"] == "Cleared" and record["request"] != "by-hand"
    await eventually(lambda: not jobs(admin, ns, COMPONENT), what="the clear Job deleted")
    assert not jobs(admin, ns, PREFETCH_COMPONENT)


async def test_a_clear_asked_again_while_its_job_is_held(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    """A second request id while the first one's Job cannot start (a quota of no pods): the second
    gets its own Job, the first Job is deleted, and the second is answered and its Job deleted."""
    admin, ns = operator.cluster.admin(), full_namespace
    source = "https://models.invalid/twice.gguf"
    key = cache_key(source)
    admin.create(model("twice", source, prefetch=True), namespace=ns)
    await eventually(
        lambda: (
            status_of(admin, "Model", "twice", ns).get("phase") == "Ready"
            and jobs(admin, ns, PREFETCH_COMPONENT)
        ),
        within=90,
        what="the Model prefetched",
    )
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }
    admin.create(quota, namespace=ns)
    names = {r: clear_job_name("twice", r, key) for r in ("r1", "r2")}

    def clear_jobs() -> list[str]:
        return sorted(j["metadata"]["name"] for j in jobs(admin, ns, COMPONENT))

    first = {"metadata": {"annotations": {CLEAR_ANNOTATION: "r1"}}, "spec": {"prefetch": False}}
    patch(admin, API, "Model", "twice", ns, first)
    await eventually(lambda: clear_jobs() == [names["r1"]], what="the first clear Job")
    record = await eventually(answer_to(admin, "twice", ns, "r1"), what="r1 recorded")
    assert (record["phase"], record["job"]) == ("Clearing", names["r1"])

    patch(admin, API, "Model", "twice", ns, {"metadata": {"annotations": {CLEAR_ANNOTATION: "r2"}}})
    await eventually(lambda: clear_jobs() == [names["r2"]], what="the second Job, the first deleted")
    record = await eventually(answer_to(admin, "twice", ns, "r2"), what="r2 recorded")
    assert (record["phase"], record["job"]) == ("Clearing", names["r2"])

    admin.delete("v1", "ResourceQuota", "no-pods", ns)
    done = await eventually(
        lambda: (r := answer_to(admin, "twice", ns, "r2")()) and r["phase"] == "Cleared" and r,
        within=90,
        what="r2 cleared",
    )
    assert done["job"] == names["r2"]
    await eventually(lambda: clear_jobs() == [], what="the second Job deleted")


async def test_a_restarted_controller_takes_up_a_pending_clear(
    operator: RunningController, full_namespace: str
) -> None:
    """A clear under way (its Job held by a quota of no pods) when a fresh controller starts (its
    own client, caches and queues, as after a restart): it reconciles the Model from
    status.cacheClear and the Job it finds, and sends nothing (no second Job, no status write);
    once the Job can run, the clear is recorded and its Job deleted."""
    admin, ns = operator.cluster.admin(), full_namespace
    source = "https://models.invalid/pending.gguf"
    admin.create(model("pending", source, prefetch=True), namespace=ns)
    await eventually(
        lambda: (
            status_of(admin, "Model", "pending", ns).get("phase") == "Ready"
            and jobs(admin, ns, PREFETCH_COMPONENT)
        ),
        within=90,
        what="the Model prefetched",
    )
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-pods"},
        "spec": {"hard": {"pods": "0"}},
    }
    admin.create(quota, namespace=ns)
    asked = {"metadata": {"annotations": {CLEAR_ANNOTATION: "r1"}}, "spec": {"prefetch": False}}
    patch(admin, API, "Model", "pending", ns, asked)
    name = clear_job_name("pending", "r1", cache_key(source))
    await eventually(
        lambda: [j["metadata"]["name"] for j in jobs(admin, ns, COMPONENT)] == [name], what="the Job"
    )
    clearing = await eventually(answer_to(admin, "pending", ns, "r1"), what="Clearing recorded")
    assert (clearing["phase"], clearing["job"]) == ("Clearing", name)
    await settled(operator.controllers.models.controller)

    async with restarted_controller(operator, ns) as restarted:
        reconciles = reconcile_log(restarted.controllers.models.controller)
        await poll(lambda: reconciles(ObjectKey(ns, "pending")) >= 1, what="the Model reconciled")
        await restarted.idle()
        assert restarted.mutating_requests() == 0, sorted(restarted.requests.request_counts.items())
        [job] = jobs(admin, ns, COMPONENT)
        assert job["metadata"]["uid"] and status_of(admin, "Model", "pending", ns)["cacheClear"] == clearing

        admin.delete("v1", "ResourceQuota", "no-pods", ns)
        done = await eventually(
            lambda: (r := answer_to(admin, "pending", ns, "r1")()) and r["phase"] == "Cleared" and r,
            within=90,
            what="r1 cleared",
        )
        assert done["job"] == name
        await eventually(lambda: not jobs(admin, ns, COMPONENT), what="the Job deleted")


async def test_deploy_a_catalog_id_and_its_server_dry_run(
    operator: RunningController, full_cluster: ClusterHandle, full_namespace: str
) -> None:
    admin, kc, ns = operator.cluster.admin(), full_cluster.kubeconfig, full_namespace
    dry = await llmkube(kc, "deploy", "qwen2.5-0.5b-instruct", "-n", ns, "--dry-run=server", "-o", "yaml")
    assert dry.code == 0, dry.text
    printed_model, printed_service = list(yaml.safe_load_all(dry.out))
    assert printed_model["spec"]["files"] == ["Qwen2.5-0.5B-Instruct-Q4_K_M.gguf"]
    assert printed_service["spec"]["contextSize"] == 8192
    assert admin.get_or_none(API, "Model", "qwen2-5-0-5b-instruct", ns) is None
    assert admin.get_or_none(API, "InferenceService", "qwen2-5-0-5b-instruct", ns) is None

    deployed = await llmkube(
        kc, "deploy", "qwen2.5-0.5b-instruct", "--gpu", "1", "-n", ns, "--no-wait", "--fit-wait", "0"
    )
    assert deployed.code == 0, deployed.text
    stored = admin.get(API, "Model", "qwen2-5-0-5b-instruct", ns)
    assert stored["spec"]["source"] == "hf://bartowski/Qwen2.5-0.5B-Instruct-GGUF"
    assert stored["spec"]["files"] == ["Qwen2.5-0.5B-Instruct-Q4_K_M.gguf"]
    assert stored["spec"]["hardware"]["accelerator"] == "cuda"
    service = admin.get(API, "InferenceService", "qwen2-5-0-5b-instruct", ns)
    assert service["spec"]["modelRef"] == "qwen2-5-0-5b-instruct" and service["spec"]["resources"]["gpu"] == 1
    unknown = await llmkube(kc, "deploy", "no-such-model", "-n", ns)
    assert unknown.code == 1 and "an id of the catalog (llmkube catalog list)" in unknown.err
