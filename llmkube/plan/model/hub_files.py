"""Which GGUF file(s) of a Hugging Face repository serve a quantization (pure): for `llmkube deploy
org/repo:QUANT` and for the Model controller, which resolves a Model that names a repository and a
`spec.quantization` but no `spec.files`.

People name these models the way llama.cpp does: `org/repo-GGUF:Q4_K_M` (a repository and a
quantization), or the repository and `--file`. A repository of GGUF files holds one file (or one
set of shards) per quantization, and projectors (`mmproj-*.gguf`); llama.cpp needs exactly one model
file. So the repository's file list (the Hub's own) decides: the quantization asked for, or the
only one there is; otherwise the user is told which quantizations exist.
"""

import enum
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson

from llmkube.plan.model.source import SourceKind, classify_source

#: a quantization as GGUF file names spell it: Q4_K_M, IQ3_XXS, Q8_0, F16, BF16, ...
_QUANT = re.compile(r"(?i)(?:^|[._-])((?:i?q[0-9](?:_[a-z0-9]+)*)|bf16|f16|f32)(?=[._-]|$)")
_SHARD = re.compile(r"(?i)-(\d{5})-of-(\d{5})\.gguf$")
_SUFFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")
#: the largest file list read (a repository of thousands of files is a few MiB)
MAX_LISTING_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class NamedModel:
    """A source split from the quantization a `:QUANT` suffix names (None: none named)."""

    source: str
    quantization: str | None


def split_quantization(source: str) -> NamedModel:
    """`org/repo:Q4_K_M` or `hf://org/repo:Q4_K_M` -> the repository and Q4_K_M; anything else as it is."""
    base, colon, suffix = source.rpartition(":")
    repository = classify_source(base) in (SourceKind.HF, SourceKind.HUGGINGFACE)
    if colon and _SUFFIX.match(suffix) and "/" not in suffix and repository:
        return NamedModel(base, suffix)
    return NamedModel(source, None)


def quantization_of(filename: str) -> str | None:
    """The quantization a GGUF file's name spells (the last one: `Model-Q4_K_M.gguf`), upper-cased."""
    name = filename.rsplit("/", 1)[-1]
    found = _QUANT.findall(_SHARD.sub(".gguf", name).removesuffix(".gguf").removesuffix(".GGUF"))
    return found[-1].upper() if found else None


def _is_model_file(path: str) -> bool:
    name = path.rsplit("/", 1)[-1].lower()
    return name.endswith(".gguf") and not name.startswith("mmproj")


@dataclass(frozen=True)
class Chosen:
    #: the files to stage, the one llama.cpp loads first (the first shard of a set)
    files: tuple[str, ...]
    quantization: str | None


class Missing(enum.Enum):
    NO_GGUF = "NoGGUF"  # no GGUF model file at all
    AMBIGUOUS = "Ambiguous"  # several, and none was named
    NO_SUCH_QUANTIZATION = "NoSuchQuantization"  # the one named is not there


@dataclass(frozen=True)
class NotChosen:
    """Why no file was chosen; each caller says it in its own terms (a flag, a spec field)."""

    kind: Missing
    repository: str
    #: the quantizations the repository has (named in its files), sorted
    quantizations: tuple[str, ...]
    models: int = 0  # how many GGUF models (quantizations, and files naming none) it holds
    asked: str | None = None


def choose_files(repository: str, paths: Iterable[str], quantization: str | None) -> Chosen | NotChosen:
    """The model file (or shards) to serve from the repository's file list; else why not."""
    by_quant: dict[str | None, list[str]] = {}
    for path in sorted(paths):
        if _is_model_file(path):
            by_quant.setdefault(quantization_of(path), []).append(path)
    named = tuple(sorted(q for q in by_quant if q is not None))
    if not by_quant:
        return NotChosen(Missing.NO_GGUF, repository, ())
    if quantization is None:
        if len(by_quant) == 1:
            (only, files), *_ = by_quant.items()
            return Chosen(tuple(files), only)
        return NotChosen(Missing.AMBIGUOUS, repository, named, models=len(by_quant))
    chosen = by_quant.get(quantization.upper())
    if not chosen:
        return NotChosen(Missing.NO_SUCH_QUANTIZATION, repository, named, asked=quantization)
    return Chosen(tuple(chosen), quantization.upper())


def listing_url(endpoint: str, repo: str, revision: str) -> str:
    """The Hub's API answer for a repository at a revision: its `siblings` are its files."""
    return f"{endpoint.rstrip('/')}/api/models/{repo}/revision/{quote(revision, safe='')}"


def listed_files(body: bytes) -> list[str] | None:
    """The repository-relative paths of the Hub's answer (`siblings[].rfilename`); None when the
    answer is not the Hub's file list."""
    try:
        document: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(document, dict) or not isinstance(document.get("siblings") or [], list):
        return None
    return [
        str(entry["rfilename"])
        for entry in document.get("siblings") or []
        if isinstance(entry, dict) and isinstance(entry.get("rfilename"), str)
    ]
