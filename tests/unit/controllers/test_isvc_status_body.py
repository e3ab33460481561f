"""The status an InferenceService's status write applies: its identity and only the fields set."""

from isvc_objects import isvc

from llmkube.api.inferenceservice import InferenceServiceStatus
from llmkube.controllers.inferenceservice import encode_status
from llmkube.kube.control.status_writer import status_body


def test_status_body_drops_unset_fields_and_keeps_the_identity() -> None:
    status = InferenceServiceStatus(phase="Pending", model_ready=False, queue_position=0)
    assert status_body(isvc("a"), encode_status(status)) == {
        "metadata": {"name": "a", "namespace": "ai"},
        "status": {"phase": "Pending", "modelReady": False, "queuePosition": 0},
    }
