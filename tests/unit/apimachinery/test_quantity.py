"""Kubernetes quantities: the canonical forms the API server stores (apimachinery resource.Quantity)."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llmkube.apimachinery.quantity import QuantityError, canonical_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        # decimal SI: mantissa with the largest suffix that keeps it an integer
        ("1", "1"),
        ("0.5", "500m"),
        (".5", "500m"),
        ("1.", "1"),
        ("1000m", "1"),
        ("1500m", "1500m"),
        ("1.5", "1500m"),
        ("1000", "1k"),
        ("1500", "1500"),
        ("1000k", "1M"),
        ("0.1", "100m"),
        ("9E", "9E"),
        ("+2", "2"),
        ("0.0000000001", "1n"),  # finer than 1n rounds up, never to zero
        # binary SI: kept binary while it is a whole number of bytes >= 1Ki
        ("100Gi", "100Gi"),
        ("1024Mi", "1Gi"),
        ("0.5Gi", "512Mi"),
        ("1.5Ki", "1536"),
        ("0.5Ki", "512"),
        ("1.1Ki", "1126400m"),
        # exponent form stays in exponent form
        ("1e3", "1e3"),
        ("12e3", "12e3"),
        ("1500e0", "1500"),
        ("1e-12", "1e-9"),
        ("1E", "1E"),  # a bare E is the exa suffix, not an exponent
        # zero and sign
        ("0", "0"),
        ("-0", "0"),
        ("0Gi", "0"),
        ("-1", "-1"),
        ("-1536Mi", "-1536Mi"),
        # SI quantities are capped at the int64 range
        ("99999999999999999999", "9223372036854775807"),
        ("8Ei", "9223372036854775807"),
    ],
)
def test_canonical_quantity(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical


@pytest.mark.parametrize(
    "text", ["", "two", "1.2.3", "1e", "1Gb", "1 Gi", "Gi", "1e1.5", "--1", "1e61", "0x10", "½"]
)
def test_invalid_quantities_raise(text: str) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        ("2Ki", Fraction(2048), "BinarySI"),
        ("250m", Fraction(1, 4), "DecimalSI"),
        ("3e2", Fraction(300), "DecimalExponent"),
    ],
)
def test_parse_keeps_value_and_format(text: str, value: Fraction, fmt: str) -> None:
    quantity = parse_quantity(text)
    assert quantity.value == value and quantity.format == fmt


_suffix = st.sampled_from(["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "e3", "e-3"])


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=0, max_value=999), _suffix)
def test_canonical_form_is_a_fixed_point_with_the_same_value(whole: int, fraction: int, suffix: str) -> None:
    text = f"{whole}.{fraction:03d}{suffix}"
    canonical = canonical_quantity(text)
    assert canonical_quantity(canonical) == canonical
    assert parse_quantity(canonical).value == parse_quantity(text).value


@pytest.mark.parametrize(
    ("text", "plain"),
    [
        ("500m", "0.5"),
        ("0.5", "0.5"),
        ("1Gi", "1073741824"),
        ("1024Mi", "1073741824"),
        ("1e3", "1000"),
        ("1n", "0.000000001"),
        ("0.0000000001", "0.000000001"),  # rounded up to 1n, as the server stores it
        ("-1536Mi", "-1610612736"),
        ("-0", "0"),
        ("8Ei", "9223372036854775807"),
    ],
)
def test_plain_is_the_value_in_decimal_notation(text: str, plain: str) -> None:
    assert parse_quantity(text).plain() == plain


@given(st.integers(min_value=-(10**6), max_value=10**6), st.integers(min_value=0, max_value=999), _suffix)
def test_equal_values_have_equal_plain_text(whole: int, fraction: int, suffix: str) -> None:
    text = f"{whole}.{fraction:03d}{suffix}"
    quantity = parse_quantity(text)
    assert parse_quantity(quantity.canonical()).plain() == quantity.plain()
    assert Fraction(quantity.plain()) == quantity.value
