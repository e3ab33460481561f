"""The bundled detector of personal data (classification modes `detector` and `hybrid`): a request
that carries any of these is classified `pii`.

* e-mail addresses;
* phone numbers: international (+ and 8 to 15 digits, separators allowed) and North American
  ((555) 123-4567, 555-123-4567, 555.123.4567);
* payment card numbers: 13 to 19 digits (spaces or dashes between them allowed) with a valid Luhn
  check digit and the prefix of a card network (Visa, Mastercard, American Express, Discover, JCB,
  Diners Club, UnionPay, Maestro);
* national identifiers: US Social Security numbers written AAA-GG-SSSS (the ranges never issued
  left out), UK National Insurance numbers, Spanish DNI and NIE (with their check letter), and IBANs
  (their country's length and the mod-97 check).

It reads every string of the request body (messages, prompts, inputs, tool calls, names), so data
cannot hide in a field the detector does not look at. Every pattern has bounded repetitions (no
catastrophic backtracking) and numbers are confirmed by their check digits, so ordinary digits (an
order number, a timestamp) are not taken for a card. A body with more candidates than it reads
(`MAX_CANDIDATES`: a flood of "@"s or digits) is classified pii unread: the gate fails closed
rather than let a body through because it was too long to look at. A detector is a safety net,
not a proof: the documentation says what it cannot see (names, addresses, free-text health data),
which is why a sensitive rule should also be fed by a trusted header.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

EMAIL = "email"
PHONE = "phone"
PAYMENT_CARD = "payment_card"
NATIONAL_ID = "national_id"

#: found where too many candidates left the text unread: treated as personal data (fail closed)
UNREAD = "unread"
#: candidates looked at per body (e-mail "@"s, numbers, letter-digit starts) before giving up
MAX_CANDIDATES = 50_000
#: the longest run of digits and separators read as a whole
MAX_NUMBER = 4096

# The text is scanned for candidates with patterns that start on a character class (the regex
# engine skips to them quickly: ordinary prose costs one fast pass each), and each candidate is
# then checked by a precise pattern over a few characters around it.
_AT = "@"
_EMAIL_LOCAL = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._%+-")
_EMAIL_DOMAIN = re.compile(r"(?:[A-Za-z0-9\-]{1,63}\.){1,8}[A-Za-z]{2,24}(?![A-Za-z0-9\-])")
_NUMBERISH = re.compile(r"[+(]?\d[\d ().\-]*")
_LETTERS_DIGIT = re.compile(r"[A-Z][A-Z]? ?\d")
_PHONE_INTL = re.compile(r"\+[1-9](?:[ .\-]?\d){7,14}(?!\d)")
_PHONE_NANP = re.compile(r"(?<!\d)(?:\([2-9]\d{2}\) ?|[2-9]\d{2}[ .\-])[2-9]\d{2}[ .\-]\d{4}(?!\d)")
_DIGIT_GROUPS = re.compile(r"\d+(?:[ \-]\d+)*")
_SSN = re.compile(r"(?<![\d\-])(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?![\d\-])")
_DNI = re.compile(r"(\d{8})-?([A-Z])(?![A-Za-z0-9])")
_NIE = re.compile(r"([XYZ])(\d{7})-?([A-Z])(?![A-Za-z0-9])")
_NINO = re.compile(
    r"(?!BG|GB|NK|KN|TN|NT|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z] ?\d{2} ?\d{2} ?\d{2} ?[A-D](?![A-Za-z0-9])"
)
_IBAN = re.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){10,30}(?![A-Za-z0-9])")

_DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"
#: IBAN length by country (ISO 13616 registry)
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
    "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip


def luhn_valid(digits: str) -> bool:
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


def card_network(digits: str) -> str | None:
    """The network whose prefixes and lengths the number has, or None."""
    n = len(digits)
    two, three, four, six = int(digits[:2]), int(digits[:3]), int(digits[:4]), int(digits[:6])
    if digits[0] == "4" and n in (13, 16, 19):
        return "visa"
    if (51 <= two <= 55 or 2221 <= four <= 2720) and n == 16:
        return "mastercard"
    if two in (34, 37) and n == 15:
        return "amex"
    if (four == 6011 or two == 65 or 644 <= three <= 649 or 622126 <= six <= 622925) and 16 <= n <= 19:
        return "discover"
    if 3528 <= four <= 3589 and 16 <= n <= 19:
        return "jcb"
    if (300 <= three <= 305 or two in (36, 38, 39) or four == 3095) and 14 <= n <= 19:
        return "diners"
    if two == 62 and 16 <= n <= 19:
        return "unionpay"
    if two in (50, 56, 57, 58, 63, 67, 68, 69) and 12 <= n <= 19:
        return "maestro"
    return None


def _card_in(token: str) -> bool:
    """Any run of whole digit groups of the token with the length, prefix and Luhn digit of a card.
    Cards are written in groups of 3 to 6 digits (4111 1111 1111 1111, 3782 822463 10005) or in one
    piece, so shorter groups end a run: a long string of single digits costs one look per digit."""
    for found in _DIGIT_GROUPS.finditer(token):
        groups = re.split(r"[ \-]", found.group())
        for first in range(len(groups)):
            digits = ""
            for group in groups[first : first + 7]:
                if len(group) < 3:
                    break
                digits += group
                if len(digits) > 19:
                    break
                if len(digits) >= 13 and card_network(digits) and luhn_valid(digits):
                    return True
    return False


def _dni_valid(number: str, letter: str) -> bool:
    return _DNI_LETTERS[int(number) % 23] == letter


def iban_valid(text: str) -> bool:
    """`text` starts with an IBAN (spaces allowed): its country's length of characters, checked
    by mod 97 (what follows, such as a next word the pattern took along, is ignored)."""
    compact = text.replace(" ", "")
    length = IBAN_LENGTHS.get(compact[:2])
    if length is None or len(compact) < length:
        return False
    compact = compact[:length]
    rotated = compact[4:] + compact[:4]
    number = "".join(str(int(char, 36)) for char in rotated)
    return int(number) % 97 == 1


@dataclass(frozen=True)
class Detection:
    kinds: frozenset[str]

    @property
    def found(self) -> bool:
        return bool(self.kinds)


def _emails(text: str, budget: list[int]) -> bool | None:
    position = text.find(_AT)
    while position >= 0:
        budget[0] -= 1
        if budget[0] < 0:
            return None
        if position and text[position - 1] in _EMAIL_LOCAL and _EMAIL_DOMAIN.match(text, position + 1):
            return True
        position = text.find(_AT, position + 1)
    return False


def _numbers(text: str, kinds: set[str], budget: list[int]) -> bool:
    """Phones, cards, SSNs and DNIs; False when the budget ran out."""
    for found in _NUMBERISH.finditer(text):
        budget[0] -= 1
        if budget[0] < 0:
            return False
        start, token = found.start(), found.group()
        if len(token) > MAX_NUMBER:
            return False  # no phone or card number is that long: a flood, not data to read
        before = text[start - 1] if start else " "
        if before.isalnum() or before in "-_":
            continue  # the middle of a word or of a longer number (an IBAN, a NIE: seen below)
        if token[0] == "+":
            if _PHONE_INTL.match(token):
                kinds.add(PHONE)
            continue
        if _PHONE_NANP.search(token):
            kinds.add(PHONE)
        if len(token) >= 13 and _card_in(token):
            kinds.add(PAYMENT_CARD)
        if _SSN.search(token):
            kinds.add(NATIONAL_ID)
        dni = _DNI.match(text, start)
        if dni is not None and _dni_valid(*dni.groups()):
            kinds.add(NATIONAL_ID)
    return True


def _letter_ids(text: str, kinds: set[str], budget: list[int]) -> bool:
    """NINOs, NIEs and IBANs (they start with letters); False when the budget ran out."""
    for found in _LETTERS_DIGIT.finditer(text):
        budget[0] -= 1
        if budget[0] < 0:
            return False
        start = found.start()
        if start and (text[start - 1].isalnum() or text[start - 1] == "_"):
            continue
        nie = _NIE.match(text, start)
        if nie is not None:
            prefix, number, letter = nie.groups()
            if _dni_valid(str("XYZ".index(prefix)) + number, letter):
                kinds.add(NATIONAL_ID)
        if _NINO.match(text, start):
            kinds.add(NATIONAL_ID)
        iban = _IBAN.match(text, start)
        if iban is not None and iban_valid(iban.group()):
            kinds.add(NATIONAL_ID)
    return True


def detect_text(text: str, *, max_candidates: int = MAX_CANDIDATES) -> Detection:
    kinds: set[str] = set()
    budget = [max_candidates]
    email = _emails(text, budget)
    if email:
        kinds.add(EMAIL)
    complete = email is not None and _numbers(text, kinds, budget) and _letter_ids(text, kinds, budget)
    if not complete:
        kinds.add(UNREAD)
    return Detection(frozenset(kinds))


def strings_of(value: Any, *, skip: frozenset[str] = frozenset({"model"})) -> Iterator[str]:
    """Every string in a parsed JSON body (keys in `skip` at the top level left out), without
    recursion (a deeply nested body cannot exhaust the stack)."""
    stack: list[Any] = [v for k, v in value.items() if k not in skip] if isinstance(value, dict) else [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def detect(body: Any) -> Detection:
    """The kinds of personal data anywhere in a request body. Strings are joined with a newline
    (which no pattern crosses), so one pass of each pattern covers the whole body."""
    return detect_text("\n".join(strings_of(body)))
