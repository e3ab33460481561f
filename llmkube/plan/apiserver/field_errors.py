"""A field error as the API server words it (k8s.io/apimachinery `util/validation/field`): the path
of the field and a message that starts with the kind of error and shows the value, e.g.
`spec.template.spec.containers[0].env[2].name: Invalid value: "A=B": ...`.

The planner's object checks produce these with the path inside the object we build; the path is
then mapped to the InferenceService field the value came from (plan/inferenceservice/field_origins.py).
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str

    def text(self) -> str:
        return f"{self.path}: {self.message}"


def show(value: Any) -> str:
    """A value as the server prints it: strings quoted, numbers and booleans bare."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(path, f"Invalid value: {show(value)}: {detail}")


def invalid_each(path: str, value: Any, details: Iterable[str]) -> list[FieldError]:
    return [invalid(path, value, detail) for detail in details]


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(path, f"Required value: {detail}" if detail else "Required value")


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    choices = ", ".join(show(choice) for choice in supported)
    return FieldError(path, f"Unsupported value: {show(value)}: supported values: {choices}")


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError(path, f"Duplicate value: {show(value)}")


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, f"Forbidden: {detail}")


def too_long(path: str, limit: int) -> FieldError:
    return FieldError(path, f"Too long: may not be more than {limit} bytes")
