"""`--manage-priority-classes`: Go-style boolean, default on, environment override."""

import argparse

import pytest

from llmkube.cli import build_parser
from llmkube.process.config import controllers_config
from llmkube.process.flags import boolean_flag


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], True),
        (["--manage-priority-classes"], True),
        (["--manage-priority-classes=true"], True),
        (["--manage-priority-classes=false"], False),
        (["--manage-priority-classes", "false"], False),
    ],
)
def test_flag(argv: list[str], expected: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLMKUBE_MANAGE_PRIORITY_CLASSES", raising=False)
    config = controllers_config(build_parser().parse_args(["controller", *argv]))
    assert config.manage_priority_classes is expected


def test_environment_sets_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLMKUBE_MANAGE_PRIORITY_CLASSES", "false")
    assert controllers_config(build_parser().parse_args(["controller"])).manage_priority_classes is False
    args = build_parser().parse_args(["controller", "--manage-priority-classes"])
    assert controllers_config(args).manage_priority_classes is True


def test_a_word_that_is_no_boolean_is_refused_with_its_value() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="'maybe'"):
        boolean_flag("maybe")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["controller", "--manage-priority-classes=maybe"])
