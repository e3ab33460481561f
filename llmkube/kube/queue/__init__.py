"""client-go's work queue: `workqueue` (dedup, in-flight tracking, delayed adds, priorities),
`state` (its bookkeeping, pure), `ratelimit` (per-item exponential and overall token-bucket
limiters). Imports nothing of the REST client or the cache."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.kube.queue.ratelimit import ItemExponentialRateLimiter, RateLimiter
    from llmkube.kube.queue.workqueue import LOW_PRIORITY, WorkQueue
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "ratelimit": "ItemExponentialRateLimiter RateLimiter",
            "workqueue": "LOW_PRIORITY WorkQueue",
        },
    )
