"""`llmkube deploy` offers exactly the values the CRDs accept: its choices come from the schema's
enums, so a value the API server would refuse is refused before any request, and none it accepts
is missing."""

import argparse
from typing import Any

import pytest

from llmkube.api import crds
from llmkube.usercli.parser import add_user_commands


def deploy_choices() -> dict[str, tuple[str, ...]]:
    parser = argparse.ArgumentParser()
    add_user_commands(parser.add_subparsers())
    (subparsers,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    deploy = subparsers.choices["deploy"]
    return {a.dest: tuple(a.choices) for a in deploy._actions if a.choices is not None}


def isvc_enum(field: str) -> list[Any]:
    enum: list[Any] = crds.inferenceservice_schema()["properties"]["spec"]["properties"][field]["enum"]
    return enum


def model_gpu_vendors() -> list[Any]:
    schema = crds.model_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    vendors: list[Any] = schema["properties"]["spec"]["properties"]["hardware"]["properties"]["gpu"][
        "properties"
    ]["vendor"]["enum"]
    return vendors


@pytest.mark.parametrize(
    ("flag", "enum"),
    [
        ("runtime", isvc_enum("runtime")),
        ("priority", isvc_enum("priority")),
        ("cache_type_k", isvc_enum("cacheTypeK")),
        ("cache_type_v", isvc_enum("cacheTypeV")),
        ("gpu_vendor", model_gpu_vendors()),
    ],
)
def test_deploy_choices_are_the_schema_enums(flag: str, enum: list[Any]) -> None:
    assert list(deploy_choices()[flag]) == enum
