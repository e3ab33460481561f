"""What a controller needs from the process that hosts it (the Manager), as a protocol: the
controllers layer sits below the process layer and must not import it."""

from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Protocol

from llmkube.kube.apply import Applier
from llmkube.kube.cache import Informer, Transform
from llmkube.kube.control import Controller, Reconciler, Watch
from llmkube.kube.events import EventRecorder
from llmkube.kube.resource import Resource
from llmkube.kube.rest import ApiClient


class ControllerHost(Protocol):
    @property
    def client(self) -> ApiClient: ...

    @property
    def applier(self) -> Applier: ...

    @property
    def recorder(self) -> EventRecorder: ...

    @property
    def own_namespace(self) -> str: ...

    def informer(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        transform: Transform | None = None,
        compact: bool = False,
    ) -> Informer: ...

    def add_controller(
        self,
        name: str,
        reconcile: Reconciler,
        *,
        watches: Sequence[Watch],
        workers: int | None = None,
        reconcile_timeout: float | None = None,
    ) -> Controller: ...

    def add_task(self, name: str, task: Callable[[], Coroutine[Any, Any, None]]) -> None: ...
