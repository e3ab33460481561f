import pytest

from llmkube.plan.model import format_size


@pytest.mark.parametrize(
    ("num_bytes", "expected"),
    [
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024 * 1024 - 1, "1024.0 KiB"),  # the reference rounds without promoting to the next unit
        (1024 * 1024, "1.0 MiB"),
        (4_939_212_390, "4.6 GiB"),  # a 7B Q4_K_M file
        (1024**4, "1.0 TiB"),
        (3 * 1024**5, "3.0 PiB"),
        (1024**6, "1.0 EiB"),
    ],
)
def test_format_size_matches_the_reference_units(num_bytes: int, expected: str) -> None:
    assert format_size(num_bytes) == expected
