"""How many reconciles run at once: one rule for the command line and for embedders.

Imports nothing, so the command line reads it while it builds its parser."""

#: concurrent InferenceService reconciles unless told otherwise (`--workers`). A reconcile makes up
#: to five requests one after another (a read before each create, Deployment, Service, status):
#: fewer workers leave the API server waiting between round trips (bench/bench_scale.py).
DEFAULT_WORKERS = 16

#: Model reconciles may copy a model into the cache (disk-bound, minutes): more at once only share
#: the same disk.
MAX_MODEL_WORKERS = 4


def model_workers_for(workers: int) -> int:
    """Models get half the InferenceService workers, at most MAX_MODEL_WORKERS."""
    return max(1, min(MAX_MODEL_WORKERS, workers // 2))
