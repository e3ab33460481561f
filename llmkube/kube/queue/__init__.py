"""client-go's work queue: `workqueue` (dedup, in-flight tracking, delayed adds, priorities),
`state` (its bookkeeping, pure), `ratelimit` (per-item exponential and overall token-bucket
limiters). Imports nothing of the REST client or the cache."""
