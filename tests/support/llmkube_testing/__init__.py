"""llmkube_testing: the local control planes, the real node tier, the stand-ins and the pytest
fixtures the tests, the benchmarks and `llmkube cluster` / `run` are made of. It lives in the
checkout (tests/support), outside the shipped package: no wheel or image carries it."""

from pathlib import Path

#: the checkout this package is part of (llmkube_testing/ -> the repository's root)
CHECKOUT = Path(__file__).resolve().parents[3]
