"""Every metric a runtime's defaults name is one its server really exports, spelled as it exports it.

The names below are the gauges each server registers, read from its own source (llama.cpp's
`tools/server/server.cpp` metrics handler, vLLM's `vllm/v1/metrics/loggers.py`, TGI's
`router/src/infer/` queue and batching code): a default HPA metric with a wrong name (TGI's is
`tgi_queue_size`, with an underscore: `tgi:queue_size` never gets a value) makes an HPA on the
default never scale, and a drain would wait on a count it can never read.
"""

import pytest

from llmkube.plan.inferenceservice.runtimes import RUNTIME_NAMES, runtime_defaults

# The gauges of requests a server holds, as each exposes them on /metrics.
EXPORTED_GAUGES: dict[str, frozenset[str]] = {
    "llamacpp": frozenset({"llamacpp:requests_processing", "llamacpp:requests_deferred"}),
    "vllm": frozenset({"vllm:num_requests_running", "vllm:num_requests_waiting"}),
    "tgi": frozenset({"tgi_queue_size", "tgi_batch_current_size"}),
    # The same llama-server, in router mode.
    "llamacpp-router": frozenset({"llamacpp:requests_processing", "llamacpp:requests_deferred"}),
    # SGLang's scheduler gauges (`python/sglang/srt/metrics/collector.py`), with --enable-metrics.
    "sglang": frozenset({"sglang:num_running_reqs", "sglang:num_queue_reqs"}),
    # PersonaPlex and the generic runtime export nothing we know of.
    "personaplex": frozenset(),
    "generic": frozenset(),
}


def test_every_runtime_is_in_the_table() -> None:
    assert set(EXPORTED_GAUGES) == set(RUNTIME_NAMES)


@pytest.mark.parametrize("runtime", RUNTIME_NAMES)
def test_default_hpa_metric_is_exported_where_we_claim_it_is(runtime: str) -> None:
    defaults = runtime_defaults(runtime)
    assert (defaults.hpa_metric in EXPORTED_GAUGES[runtime]) is defaults.exports_hpa_metric, (
        f"{runtime}: the default HPA metric {defaults.hpa_metric!r} is not among the gauges its server "
        f"exports {sorted(EXPORTED_GAUGES[runtime])}"
    )


@pytest.mark.parametrize(
    ("runtime", "in_flight"),
    [
        ("llamacpp", ("llamacpp:requests_processing", "llamacpp:requests_deferred")),
        ("vllm", ("vllm:num_requests_running", "vllm:num_requests_waiting")),
        ("tgi", ("tgi_batch_current_size", "tgi_queue_size")),
        ("personaplex", ()),
        ("generic", ()),
    ],
)
def test_in_flight_gauges_per_runtime(runtime: str, in_flight: tuple[str, ...]) -> None:
    """What a drain before a rollout sums: the requests being generated and those waiting."""
    names = runtime_defaults(runtime).in_flight_metrics
    assert names == in_flight
    assert set(names) <= EXPORTED_GAUGES[runtime]
