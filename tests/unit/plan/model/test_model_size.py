import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmkube.plan.model import format_size
from llmkube.plan.model.size import parse_size

GIB = 1024**3


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


@pytest.mark.parametrize(
    ("text", "size"),
    [("4.6 GiB", int(4.6 * GIB)), ("512 B", 512), ("1.0 KiB", 1024), ("0", None), ("", None), ("x", None)],
)
def test_parse_size(text: str, size: int | None) -> None:
    assert parse_size(text) == size


@given(st.integers(min_value=1, max_value=2**62))
def test_parse_size_reads_format_size_back_to_one_decimal_of_its_unit(num_bytes: int) -> None:
    text = format_size(num_bytes)
    unit = 1024 ** (["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"].index(text.split()[1]))
    assert abs((parse_size(text) or 0) - num_bytes) <= unit * 0.05 + 1
