"""Controllers as controller-runtime runs them: `controller` (workers calling
`reconcile(key) -> Result`, requeue and backoff), `handlers` and `predicates` (which changes wake
which keys), `status_writer` (write status only when more than its timestamp changed, and follow
the cache so our own writes do not echo), `fairslots` (background work shared fairly between
namespaces). The top of the machinery: may import everything else in `llmkube.kube`."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.kube.control.controller import Controller, Reconciler, Result, TerminalError
    from llmkube.kube.control.fairslots import FairSlots
    from llmkube.kube.control.handlers import Watch, enqueue_mapped, enqueue_object, enqueue_owner
    from llmkube.kube.control.predicates import (
        annotations_changed,
        any_of,
        deleted,
        generation_changed,
        labels_changed,
    )
    from llmkube.kube.control.status_writer import StatusWriter
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "controller": "Controller Reconciler Result TerminalError",
            "fairslots": "FairSlots",
            "handlers": "Watch enqueue_mapped enqueue_object enqueue_owner",
            "predicates": "annotations_changed any_of deleted generation_changed labels_changed",
            "status_writer": "StatusWriter",
        },
    )
