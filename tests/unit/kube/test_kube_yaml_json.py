"""The server-side apply body: JSON that a YAML parser reads back as the same data."""

import orjson
import pytest
import yaml

from llmkube.kube import yaml_json


@pytest.mark.parametrize(
    "text",
    [
        "plain",
        "é ü 日本 😀",
        "del \x7f",
        "c1 \x80 \x92 \x9f",
        "nel \x85",
        "line separators \u2028 \u2029",
        "non-characters \ufffe \uffff",
        "c0 \x00 \x01 \t \n \r",
    ],
)
def test_yaml_and_json_read_the_same_value(text: str) -> None:
    body = yaml_json.dumps({"metadata": {"annotations": {"k": text}}})
    assert orjson.loads(body)["metadata"]["annotations"]["k"] == text
    assert yaml.safe_load(body.decode())["metadata"]["annotations"]["k"] == text


def test_plain_bodies_are_orjson_output() -> None:
    value = {"a": [1, 2.5, None, True], "b": "ü"}
    assert yaml_json.dumps(value) == orjson.dumps(value)
