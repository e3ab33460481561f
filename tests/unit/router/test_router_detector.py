"""The bundled personal-data detector: each kind found where it is, with its check digits; ordinary
text, numbers and dates left alone; every string of a body read; bounded time on hostile input."""

import time

import pytest

from llmkube.plan.router.detector import (
    EMAIL,
    NATIONAL_ID,
    PAYMENT_CARD,
    PHONE,
    UNREAD,
    card_network,
    detect,
    detect_text,
    iban_valid,
    luhn_valid,
)

FOUND: list[tuple[str, str]] = [
    ("write to jane.doe+work@example.co.uk today", EMAIL),
    ("mail: J_Smith@mail.corp-example.com.", EMAIL),
    ("call +44 20 7946 0958", PHONE),
    ("call +1-202-555-0143 now", PHONE),
    ("office (415) 555-2671", PHONE),
    ("office 415-555-2671", PHONE),
    ("office 415.555.2671", PHONE),
    ("card 4111 1111 1111 1111 exp 12/29", PAYMENT_CARD),
    ("card 4111-1111-1111-1111", PAYMENT_CARD),
    ("card 4111111111111111", PAYMENT_CARD),
    ("mc 5555555555554444", PAYMENT_CARD),
    ("amex 3782 822463 10005", PAYMENT_CARD),
    ("discover 6011 1111 1111 1117", PAYMENT_CARD),
    ("ssn 078-05-1120", NATIONAL_ID),
    ("NI number AB 12 34 56 C", NATIONAL_ID),
    ("NI AB123456C", NATIONAL_ID),
    ("DNI 12345678Z", NATIONAL_ID),
    ("DNI 12345678-Z", NATIONAL_ID),
    ("NIE X1234567L", NATIONAL_ID),
    ("IBAN DE89 3704 0044 0532 0130 00 for payment", NATIONAL_ID),
    ("IBAN GB82WEST12345698765432", NATIONAL_ID),
]


@pytest.mark.parametrize(("text", "kind"), FOUND, ids=[t for t, _ in FOUND])
def test_found(text: str, kind: str) -> None:
    assert detect_text(text).kinds == {kind}


NOT_FOUND = [
    "Hello, who are you?",
    "user@localhost and a@b",  # no domain with a top-level part
    "version 1.2.3.4 released 2026-05-12 at 12:30:45",
    "order 1234567812345670 shipped",  # Luhn-valid, but no card network starts with 1
    "card 4111 1111 1111 1112",  # Luhn fails
    "ssn 000-12-3456 or 666-12-3456 or 900-12-3456 or 123-00-4567 or 123-45-0000",  # never issued
    "123456789",  # nine digits without dashes: not taken for an SSN
    "NI QQ123456C and BG123456A",  # prefixes never issued
    "DNI 12345678A",  # wrong check letter
    "IBAN DE89 3704 0044 0532 0130 01",  # mod 97 fails
    "x = 1 + 4155552671",  # no separators in a national number, and + is not before the digits
    "+1 555",  # too short for a phone number
    "the model llama-3.1-8b has 8192 tokens of context and 32 layers",
]


@pytest.mark.parametrize("text", NOT_FOUND)
def test_not_found(text: str) -> None:
    assert not detect_text(text).found, detect_text(text)


def test_several_kinds() -> None:
    found = detect_text("jane@example.com, 4111111111111111, +33 1 23 45 67 89")
    assert found.kinds == {EMAIL, PAYMENT_CARD, PHONE}


def test_every_string_of_a_body_is_read() -> None:
    body = {
        "model": "jane@example.com",  # the model name is not the user's data
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "x"}]},
            {
                "role": "assistant",
                "tool_calls": [{"function": {"arguments": '{"card": "5555555555554444"}'}}],
            },
        ],
        "user": "someone",
        "metadata": {"deep": [[["078-05-1120"]]]},
    }
    assert detect(body).kinds == {PAYMENT_CARD, NATIONAL_ID}
    assert not detect({"model": "jane@example.com", "messages": []}).found


def test_deep_nesting_does_not_recurse() -> None:
    body: object = "jane@example.com"
    for _ in range(100_000):
        body = [body]
    assert detect({"messages": body}).kinds == {EMAIL}


def test_luhn_and_networks() -> None:
    assert luhn_valid("4111111111111111") and not luhn_valid("4111111111111112")
    assert [
        card_network(n)
        for n in ("4111111111111111", "5555555555554444", "378282246310005", "1234567812345670")
    ] == ["visa", "mastercard", "amex", None]
    assert iban_valid("GB82 WEST 1234 5698 7654 32") and not iban_valid("XX82WEST12345698765432")


def test_what_cannot_be_read_is_taken_for_personal_data() -> None:
    """A flood of candidates, or one number longer than any phone or card: fail closed."""
    assert detect_text("@x. " * 20, max_candidates=10).kinds == {UNREAD}
    assert detect_text("1 " * 5000).kinds == {UNREAD}
    assert detect_text("1 " * 100).kinds == set()


@pytest.mark.parametrize(
    "hostile",
    [
        "a" * 200_000 + "@",
        "1-" * 100_000,
        "a." * 100_000 + "@b",
        "+" + "1 " * 100_000,
        ("@a." * 50_000) + "b",
    ],
    ids=["no-domain", "dashes", "dots", "spaced-digits", "at-dots"],
)
def test_hostile_input_takes_bounded_time(hostile: str) -> None:
    """A guard against catastrophic backtracking (which takes minutes on such input), not a
    performance figure: 200 KB take tens of milliseconds."""
    started = time.process_time()
    detect_text(hostile)
    assert time.process_time() - started < 5.0
