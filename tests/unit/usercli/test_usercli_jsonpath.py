"""`-o jsonpath=`: kubectl's template syntax on the objects the commands print (pure). The cases
are kubectl's documented examples (kubectl's JSONPath support page) on its sample document, plus
the ones people write against InferenceServices."""

from typing import Any

import pytest

from llmkube.usercli.jsonpath import JSONPathError, render

# kubectl's sample document for its JSONPath page.
SAMPLE: dict[str, Any] = {
    "kind": "List",
    "items": [
        {
            "kind": "None",
            "metadata": {"name": "127.0.0.1", "labels": {"kubernetes.io/hostname": "127.0.0.1"}},
            "status": {
                "capacity": {"cpu": "4"},
                "addresses": [{"type": "LegacyHostIP", "address": "127.0.0.1"}],
            },
        },
        {
            "kind": "None",
            "metadata": {"name": "127.0.0.2"},
            "status": {
                "capacity": {"cpu": "8"},
                "addresses": [
                    {"type": "LegacyHostIP", "address": "127.0.0.2"},
                    {"type": "another", "address": "127.0.0.3"},
                ],
            },
        },
    ],
    "users": [
        {"name": "myself", "user": {}},
        {"name": "e2e", "user": {"username": "admin", "password": "secret"}},
    ],
}


@pytest.mark.parametrize(
    ("template", "output"),
    [
        ("{.kind}", "List"),
        ("{['kind']}", "List"),
        ("{$.kind}", "List"),
        ("kind: {.kind}!", "kind: List!"),
        ("{..name}", "127.0.0.1 127.0.0.2 myself e2e"),
        ("{.items[*].metadata.name}", "127.0.0.1 127.0.0.2"),
        ("{.users[0].name}", "myself"),
        ("{.users[-1].name}", "e2e"),
        ("{.items[0:1].metadata.name}", "127.0.0.1"),
        ("{.users[*]['name']}", "myself e2e"),
        ("{.users[0]['name','user']}", "myself {}"),
        ("{.items[*].status['capacity']}", '{"cpu":"4"} {"cpu":"8"}'),
        ('{.users[?(@.name=="e2e")].user.password}', "secret"),
        ('{.users[?(@.name!="e2e")].name}', "myself"),
        ("{.users[?(@.user.username)].name}", "e2e"),
        ('{.items[*].status.addresses[?(@.type=="another")].address}', "127.0.0.3"),
        (
            "{range .items[*]}[{.metadata.name}, {.status.capacity.cpu}] {end}",
            "[127.0.0.1, 4] [127.0.0.2, 8] ",
        ),
        (
            '{range .items[*]}{.metadata.name}{"\\t"}{.status.capacity.cpu}{"\\n"}{end}',
            "127.0.0.1\t4\n127.0.0.2\t8\n",
        ),
        ("{.items[0].metadata.labels['kubernetes.io/hostname']}", "127.0.0.1"),
        ("{.items[0].metadata.labels.kubernetes\\.io/hostname}", "127.0.0.1"),
        ("{.missing.field}", ""),
        ("{.items[5].metadata.name}", ""),
        ("{.items[0].status.addresses}", '[{"type":"LegacyHostIP","address":"127.0.0.1"}]'),
        ("no braces at all", "no braces at all"),
    ],
)
def test_kubectl_examples(template: str, output: str) -> None:
    assert render(template, SAMPLE) == output


ISVC = {
    "metadata": {"name": "tiny", "namespace": "ml"},
    "spec": {"replicas": 2},
    "status": {
        "phase": "Ready",
        "readyReplicas": 2,
        "conditions": [
            {"type": "Available", "status": "True"},
            {"type": "Degraded", "status": "False"},
        ],
        "endpoint": "http://tiny.ml.svc.cluster.local:8080/v1/chat/completions",
    },
}


@pytest.mark.parametrize(
    ("template", "output"),
    [
        ("{.status.phase}", "Ready"),
        ("{.status.endpoint}", "http://tiny.ml.svc.cluster.local:8080/v1/chat/completions"),
        ('{.status.conditions[?(@.type=="Available")].status}', "True"),
        ("{.status.readyReplicas}/{.spec.replicas}", "2/2"),
        ("{.status.readyReplicas}", "2"),
        ("{.status.conditions[?(@.type)].type}", "Available Degraded"),
    ],
)
def test_on_an_inference_service(template: str, output: str) -> None:
    assert render(template, ISVC) == output


def test_numbers_compare_as_numbers() -> None:
    data = {"items": [{"n": "a", "v": 1}, {"n": "b", "v": 5}, {"n": "c", "v": "x"}]}
    assert render("{.items[?(@.v>2)].n}", data) == "b"
    assert render("{.items[?(@.v<=1)].n}", data) == "a"
    assert render("{.items[?(@.v==true)].n}", {"items": [{"n": "t", "v": True}]}) == "t"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{.metadata.name", "unclosed { at character 0"),
        ("{range .items[*]}{.x}", "{range} at character 0 has no {end}"),
        ("{.x}{end}", "{end} without {range} at character 4"),
        ("{.items[a]}", "cannot read the index [a]"),
        ("{.items[?(x==1)]}", 'a filter compares a field of "@"'),
        ('{"open}', "unclosed { at character 0"),  # the quote runs to the end
        ("{.items[0}", "unclosed ["),
    ],
)
def test_a_template_that_cannot_be_parsed_says_where(template: str, message: str) -> None:
    with pytest.raises(
        JSONPathError, match=message.replace("[", r"\[").replace("{", r"\{").replace("(", r"\(")
    ):
        render(template, SAMPLE)
