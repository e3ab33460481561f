"""`spec.files` and `spec.mmproj`: which files a Model stages from its source, checked.

The paths are relative to the source (a Hugging Face repository, an S3 prefix, an http(s) base
URL, a directory of a claim) and become paths below the Model's cache directory, so each one is
held to what can never leave it: no absolute path, no `.` or `..` part, no empty part, no control
character. Wildcards would need a listing of the source, which the downloader does not make: the
files are named one by one. The first file is the one the runtime loads (llama.cpp finds the
other shards of a split GGUF beside the first); duplicates are staged once; the projector comes
last.
"""

import unicodedata
from dataclasses import dataclass

from llmkube.api.model import ModelSpec

_WILDCARDS = frozenset("*?[")


@dataclass(frozen=True)
class StagingPlan:
    primary: str  # files[0]: what the runtime loads
    files: tuple[str, ...]  # every file to stage, in order, once each (the projector included)
    mmproj: str | None = None


@dataclass(frozen=True)
class FileSetProblem:
    field: str  # "spec.files[2]", "spec.mmproj"
    message: str

    def text(self) -> str:
        return f"{self.field}: {self.message}"


def path_problem(path: str) -> str | None:
    """What makes `path` unusable as a path relative to the source and below the cache, if anything."""
    if not path:
        return "is empty"
    if path.startswith("/"):
        return f'"{path}" is absolute: name it relative to the source'
    if any(unicodedata.category(char).startswith("C") for char in path):
        return f"{path!r} holds a control character"
    if _WILDCARDS.intersection(path):
        return f'"{path}" has a wildcard: list the files one by one'
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return f'"{path}" has an empty, "." or ".." part'
    return None


def staging_plan(spec: ModelSpec) -> StagingPlan | FileSetProblem | None:
    """The files to stage; None when the Model names none."""
    files, mmproj = list(spec.files or []), spec.mmproj or None
    if not files and not mmproj:
        return None
    if not files:
        return FileSetProblem("spec.files", "spec.mmproj needs the model file it projects for: list it first")
    for index, path in enumerate(files):
        if (problem := path_problem(path)) is not None:
            return FileSetProblem(f"spec.files[{index}]", problem)
    if mmproj is not None and (problem := path_problem(mmproj)) is not None:
        return FileSetProblem("spec.mmproj", problem)
    ordered = list(dict.fromkeys([*files, *([mmproj] if mmproj else [])]))
    return StagingPlan(primary=files[0], files=tuple(ordered), mmproj=mmproj)
