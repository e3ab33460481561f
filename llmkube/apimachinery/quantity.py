"""Kubernetes resource quantities (apimachinery `resource.Quantity`): parse, validate, canonicalise.

The reference operator parsed user quantities with a panicking parser (`cpu: "two"` crashed it).
Here a bad string is a `QuantityError` the planner turns into a status message, and a good one is
written in the canonical form the API server itself would store ("0.5" -> "500m", "1024Mi" ->
"1Gi"), so an apply of an unchanged object compares equal to what the server holds.
"""

import functools
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

QuantityFormat = Literal["DecimalSI", "BinarySI", "DecimalExponent"]

# <sign><number><suffix>, where suffix is a binary SI suffix, a decimal SI suffix or an exponent.
# The exponent alternative comes first so that "1E3" is 1000 while a bare "1E" is one exa.
_QUANTITY = re.compile(
    r"^(?P<sign>[+-])?(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>[eE][+-]?[0-9]+|[KMGTPE]i|[numkMGTPE])?$"
)
_BINARY_EXPONENTS = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}  # powers of 1024
_DECIMAL_EXPONENTS = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIX = {power: suffix for suffix, power in _BINARY_EXPONENTS.items()}
_DECIMAL_SUFFIX = {power: suffix for suffix, power in _DECIMAL_EXPONENTS.items()}

# The API server caps SI quantities at the int64 range and rounds anything finer than 1n up.
_MAX_SI = Fraction(2**63 - 1)
_NANO = 10**9
# Far beyond any real request; it keeps a hostile "1e999999999" from building a huge integer.
_MAX_EXPONENT = 60


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


@dataclass(frozen=True)
class Quantity:
    value: Fraction
    format: QuantityFormat

    def canonical(self) -> str:
        if self.value == 0:
            return "0"
        if self.format == "BinarySI" and abs(self.value) >= 1024 and self.value.denominator == 1:
            return _binary_canonical(int(self.value))
        # Small or fractional binary values are shown in decimal so no precision is lost.
        return _decimal_canonical(self.value, self.format == "DecimalExponent")

    def plain(self) -> str:
        """The value in plain decimal notation ("0.5", "1073741824"): equal values, equal text."""
        nanos = int(self.value * _NANO)  # exact: every value is rounded to 1n
        whole, fraction = divmod(abs(nanos), _NANO)
        digits = f"{fraction:09d}".rstrip("0")
        return ("-" if nanos < 0 else "") + (f"{whole}.{digits}" if digits else str(whole))


@functools.lru_cache(maxsize=4096)  # every reconcile parses the same few strings again
def parse_quantity(text: str) -> Quantity:
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity (for example 500m, 2, 4Gi, 1e3)")
    number = Fraction(match["number"])
    suffix = match["suffix"] or ""
    fmt: QuantityFormat
    if suffix in _BINARY_EXPONENTS:
        fmt, value = "BinarySI", number * 1024 ** _BINARY_EXPONENTS[suffix]
    elif suffix in _DECIMAL_EXPONENTS:
        fmt, value = "DecimalSI", number * Fraction(10) ** _DECIMAL_EXPONENTS[suffix]
    else:
        exponent = int(suffix[1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise QuantityError(f"{text!r}: exponent out of range")
        fmt, value = "DecimalExponent", number * Fraction(10) ** exponent
    magnitude = Fraction(math.ceil(value * _NANO), _NANO)  # round up to 1n, as the server does
    if fmt != "DecimalExponent":
        magnitude = min(magnitude, _MAX_SI)
    return Quantity(-magnitude if match["sign"] == "-" else magnitude, fmt)


@functools.lru_cache(maxsize=4096)  # the same few strings at every reconcile, as parse_quantity's
def canonical_quantity(text: str) -> str:
    return parse_quantity(text).canonical()


def _binary_canonical(value: int) -> str:
    power = 0
    while value % 1024 == 0:  # terminates: the int64 cap keeps the power at most 6
        value //= 1024
        power += 1
    return f"{value}{_BINARY_SUFFIX.get(power, '')}"


def _decimal_canonical(value: Fraction, exponent_form: bool) -> str:
    # Mantissa and a power of ten that is a multiple of three, with as few digits as possible.
    mantissa, exponent = int(value * _NANO), -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    while exponent % 3:
        mantissa *= 10
        exponent -= 1
    if exponent_form:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    # Rounding to 1n and the int64 cap keep the exponent within n..E.
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"
