"""Events (events.k8s.io/v1) as client-go's recorder writes them: `recorder` (one Event per
reason, object and message, patched as a series when it repeats), `series` (names and
aggregation), `backlog` (a bounded queue of writes, so a burst never holds up reconciles). Writes
only while this process leads."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.kube.events.recorder import EventRecorder
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "recorder": "EventRecorder",
        },
    )
