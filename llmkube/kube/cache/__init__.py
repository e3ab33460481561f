"""The informer cache: `reflector` (list, then watch from the list's resourceVersion, relist on
410 Gone, bookmarks, a `watchdog` for silent watches, the watch stream's `lines`), `store` (indexed,
optionally compact JSON bytes), `informer` (shares one reflector and store among handlers),
`transform` (what is kept of each object). Imports the REST client, nothing above it."""

from typing import TYPE_CHECKING

from llmkube.faces import lazy_face

if TYPE_CHECKING:  # the type checker reads the face here (pyproject.toml: implicit_reexport)
    from llmkube.kube.cache.informer import Informer
    from llmkube.kube.cache.store import BY_NAMESPACE, Change, Store, by_field, by_label, resource_version
    from llmkube.kube.cache.transform import Transform, keep_only, keep_owned
else:
    __all__, __getattr__ = lazy_face(
        __name__,
        {
            "informer": "Informer",
            "store": "BY_NAMESPACE Change Store by_field by_label resource_version",
            "transform": "Transform keep_only keep_owned",
        },
    )
