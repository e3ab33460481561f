"""The API server's syntax rules (apimachinery's own good and bad examples, and its messages)."""

from collections.abc import Callable

import pytest

from llmkube.plan.apiserver.kube_syntax import (
    annotations_size,
    config_map_key_errors,
    dns1123_label_errors,
    dns1123_subdomain_errors,
    http_header_name_errors,
    is_sysctl_name,
    label_value_errors,
    path_segment_name_errors,
    port_name_errors,
    port_number_errors,
    qualified_name_errors,
    relaxed_env_var_name_errors,
    unix_id_errors,
)

# (rule, valid values, invalid values)
TABLE: list[tuple[Callable[[str], list[str]], list[str], list[str]]] = [
    (
        qualified_name_errors,
        [
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "simple/simple",
            "now.with.dots/simple",
            "1.2.3.4/5678",
            "Uppercase_Is_OK_123",
            "example.com/Uppercase_Is_OK_123",
            "a" * 63,
            "a" * 253 + "/" + "b" * 63,
        ],
        [
            "nospecialchars%^=@",
            "cantendwithadash-",
            "-cantstartwithadash-",
            "only/one/slash",
            "Example.com/abc",
            "example_com/abc",
            "example.com/",
            "/simple",
            "a" * 64,
            "a" * 254 + "/abc",
            "",
            "new\nline",
            "team\n",
        ],
    ),
    (
        label_value_errors,
        [
            "",
            "simple",
            "now-with-dashes",
            "1-starts-with-num",
            "end-with-num-1",
            "1234",
            "a" * 63,
            "Mixed_Case.1",
        ],
        [
            "nospecialchars%^=@",
            "Tama-nui-te-rā.is.Māori.sun",
            "\\backslashes\\are\\bad",
            "-starts",
            "a" * 64,
            "x\n",
        ],
    ),
    (
        dns1123_label_errors,
        ["a", "ab", "abc", "a1", "a-1", "a--1--2--b", "0", "01", "a" * 63],
        ["", "A", "ABC", "aBc", "A1", "a.b", "-a", "a-", "a_b", "a" * 64, "1 "],
    ),
    (
        dns1123_subdomain_errors,
        ["a", "ab", "a.b", "a-1.b-2", "0.0", "11.22.33", "a" * 253],
        ["", "A", "a..b", "a.", ".a", "a_b", "a.-b", "a" * 254, "nvidia "],
    ),
    (
        relaxed_env_var_name_errors,
        ["A", "ABC", "AbC_123", "a.b-c", "1ABC", "has space", "#$%"],
        ["", "a=b", "é", "tab\t"],
    ),
    (
        config_map_key_errors,
        ["a", "A", "a.b", "a-b_c", "1", "a" * 253],
        ["", "a/b", "a b", ".", "..", "..a", "a" * 254],
    ),
    (
        port_name_errors,
        ["http", "h2", "metrics-1", "a" * 15],
        ["", "HTTP", "1234", "a--b", "-a", "a-", "a" * 16],
    ),
    (http_header_name_errors, ["X-Header", "a1", "Content-Type"], ["", "X_Header", "a b", "a:b"]),
    (
        path_segment_name_errors,
        ["cpu", "llamacpp:requests_processing", "a.b", "gpu!"],
        [".", "..", "a/b", "50%"],
    ),
]


@pytest.mark.parametrize(("rule", "good", "bad"), TABLE, ids=[rule.__name__ for rule, _, _ in TABLE])
def test_the_servers_good_and_bad_examples(
    rule: Callable[[str], list[str]], good: list[str], bad: list[str]
) -> None:
    assert {value: rule(value) for value in good} == {value: [] for value in good}
    assert [value for value in bad if not rule(value)] == []


@pytest.mark.parametrize(
    ("rule", "value", "messages"),
    [
        (
            qualified_name_errors,
            "a b",
            [
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            ],
        ),
        (qualified_name_errors, "/x", ["prefix part must be non-empty"]),
        (label_value_errors, "a" * 64, ["must be no more than 63 characters"]),
        (dns1123_label_errors, "a.b", ["must not contain dots"]),
        (
            relaxed_env_var_name_errors,
            "A=B",
            [
                "a valid environment variable name must consist only of printable ASCII characters "
                "other than '='"
            ],
        ),
        (config_map_key_errors, "..x", ["must not start with '..'"]),
        (path_segment_name_errors, "a/b%", ["may not contain '/'", "may not contain '%'"]),
    ],
)
def test_messages_are_the_servers(rule: Callable[[str], list[str]], value: str, messages: list[str]) -> None:
    found = rule(value)
    assert found == messages or (len(messages) == 1 and found[-1] == messages[0]), found


def test_regex_error_examples_read_like_the_servers() -> None:
    # apimachinery's RegexError joins examples with " or " after each "'x', ".
    (message,) = dns1123_subdomain_errors("A")
    assert message.endswith(
        "(e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    )


def test_numbers() -> None:
    assert [port_number_errors(p) for p in (1, 65535)] == [[], []]
    assert port_number_errors(0) == ["must be between 1 and 65535, inclusive"]
    assert port_number_errors(65536) != []
    assert [unix_id_errors(i) for i in (0, 2**31 - 1)] == [[], []]
    assert unix_id_errors(-1) == ["must be between 0 and 2147483647, inclusive"]
    assert unix_id_errors(2**31) != []


def test_sysctl_names() -> None:
    assert all(is_sysctl_name(n) for n in ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "a/b.c"))
    assert not any(is_sysctl_name(n) for n in ("", "Kernel.x", "a..b", ".a", "a.", "a" * 254, "a_"))


def test_annotation_size_counts_bytes() -> None:
    assert annotations_size({"k": "é"}) == 3


def test_answers_are_cached_for_values_as_long_as_a_name_only() -> None:
    """Planned objects repeat their keys and names; a huge value from a spec must not be kept."""
    from llmkube.plan.apiserver import kube_syntax

    kube_syntax._cached_match.cache_clear()
    assert dns1123_subdomain_errors("example.com") == [] == dns1123_subdomain_errors("example.com")
    assert kube_syntax._cached_match.cache_info().hits == 1
    huge = "a" * 100_000
    assert label_value_errors(huge) == label_value_errors(huge) != []
    assert kube_syntax._cached_match.cache_info().currsize == 1
