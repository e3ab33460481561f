"""What the user commands decide when llmkube is not whole: which kinds discovery lacks, and when
a deploy says no controller acts on its objects."""

import pytest

from llmkube.kube.types import Obj
from llmkube.usercli.crds_check import crds_not_installed, missing_plurals
from llmkube.usercli.progress import controller_silent


@pytest.mark.parametrize(
    ("discovery", "missing"),
    [
        (None, ["models", "inferenceservices"]),
        ({"resources": []}, ["models", "inferenceservices"]),
        ({"resources": [{"name": "models"}, {"name": "models/status"}]}, ["inferenceservices"]),
        ({"resources": [{"name": "models"}, {"name": "inferenceservices"}, {"name": "modelrouters"}]}, []),
    ],
)
def test_missing_plurals(discovery: Obj | None, missing: list[str]) -> None:
    assert missing_plurals(discovery) == missing


def test_the_message_names_the_cluster_the_context_and_how_to_install() -> None:
    message = crds_not_installed("https://k:6443", "prod", ["inferenceservices"])
    assert message.startswith(
        "the llmkube CRDs are not installed in the cluster at https://k:6443 (context prod)"
    )
    assert "helm install llmkube charts/llmkube" in message and "kubectl apply --server-side -k" in message
    assert "(context" not in crds_not_installed("https://k:6443", None, ["models"])


WITH_STATUS: Obj = {"status": {"phase": "Pending"}}


@pytest.mark.parametrize(
    ("model", "isvc", "waited", "silent"),
    [
        ({}, {}, 15.0, True),  # nothing wrote any status in 15 s
        (None, None, 16.0, True),
        ({}, {}, 14.9, False),  # not yet
        (WITH_STATUS, {}, 60.0, False),  # the controller wrote the Model's: it acts
        ({}, WITH_STATUS, 60.0, False),
        ({"status": {}}, {"status": {}}, 60.0, True),  # an empty status is no status
    ],
)
def test_controller_silent(model: Obj | None, isvc: Obj | None, waited: float, silent: bool) -> None:
    assert controller_silent(model, isvc, waited, 15.0) is silent
