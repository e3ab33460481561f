"""The memory of our own last apply of each object (kube/apply/recent_applies.py)."""

from llmkube.kube.apply.recent_applies import CREATE_MEMORY_SECONDS, RecentApplies, body_digest, recent_key

KEY = ("apps/v1/deployments", "ai", "demo")
A, B = body_digest({"spec": {"image": "a"}}), body_digest({"spec": {"image": "b"}})


def test_the_same_body_over_a_stale_copy_is_already_applied() -> None:
    recent = RecentApplies()
    recent.record(KEY, A, ["10"], "11")
    assert recent.already_applied(KEY, A, "10")
    assert not recent.already_applied(KEY, B, "10")  # another body: apply it
    assert recent.already_applied(KEY, A, "10")  # still remembered


def test_the_memory_ends_when_the_cache_shows_another_version() -> None:
    recent = RecentApplies()
    recent.record(KEY, A, ["10"], "11")
    assert not recent.already_applied(KEY, A, "11")  # ours arrived: the usual compare decides
    assert len(recent) == 0
    recent.record(KEY, A, ["10"], "11")
    assert not recent.already_applied(KEY, A, "12")  # someone changed it since
    assert len(recent) == 0


def test_a_chain_of_our_applies_keeps_every_older_version_stale() -> None:
    recent = RecentApplies()
    recent.record(KEY, A, ["10"], "11")
    recent.record(KEY, B, ["10"], "12")  # applied B over the copy still at 10
    assert recent.already_applied(KEY, B, "10") and recent.already_applied(KEY, B, "11")
    assert not recent.already_applied(KEY, B, "12")


def test_a_create_is_not_remembered_as_an_update() -> None:
    recent = RecentApplies()
    recent.record(KEY, A, [None], "1")
    assert not recent.already_applied(KEY, A, None) and len(recent) == 0


CREATED = {"metadata": {"name": "demo", "resourceVersion": "1"}}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_create_is_remembered_only_for_a_followed_resource_until_seen_or_the_deadline() -> None:
    clock = Clock()
    recent = RecentApplies(clock)
    recent.record_create(KEY, A, CREATED)
    assert recent.created(KEY, A) is None  # nobody tells us what the cache sees: never skip
    recent.follow(KEY[0])
    recent.record_create(KEY, A, CREATED)
    assert recent.created(KEY, A) == CREATED and recent.created(KEY, B) is None
    recent.seen(KEY)  # any event of it: the cache tells the truth now
    assert recent.created(KEY, A) is None
    recent.record_create(KEY, A, CREATED)
    clock.now += CREATE_MEMORY_SECONDS
    assert recent.created(KEY, A) is None and len(recent) == 0
    recent.record_create(KEY, A, CREATED)
    recent.forget(KEY)
    assert recent.created(KEY, A) is None


def test_the_key_of_a_store_key() -> None:
    assert recent_key("v1/configmaps", "ns/cm") == ("v1/configmaps", "ns", "cm")
    assert recent_key("scheduling.k8s.io/v1/priorityclasses", "high") == (
        "scheduling.k8s.io/v1/priorityclasses",
        "",
        "high",
    )


def test_digests_ignore_key_order() -> None:
    assert body_digest({"a": 1, "b": {"c": 2, "d": 3}}) == body_digest({"b": {"d": 3, "c": 2}, "a": 1})
