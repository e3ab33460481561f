"""A package's face, loaded lazily: the names other packages may use, each imported from its module
when first asked for (PEP 562), so that importing one module of a package costs that module alone.
The router's packages need it: the command line reads the router's flags without loading its
server, and the router process loads none of the controller's half of `plan.router` (pydantic).

    if TYPE_CHECKING:  # the type checker reads the names here
        from pkg.module import Name as Name
    else:
        __all__, __getattr__ = lazy_face(__name__, {"module": "Name Other"})

Imports nothing of ours (the bottom of the layers)."""

import importlib
from collections.abc import Callable, Mapping


def lazy_face(package: str, face: Mapping[str, str]) -> tuple[list[str], Callable[[str], object]]:
    """`__all__` and `__getattr__` for `package`, whose `face` maps each module to the names of it
    the face exports (separated by spaces)."""
    modules = {name: module for module, names in face.items() for name in names.split()}

    def attribute(name: str) -> object:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    return sorted(modules), attribute
