"""Which GGUF file(s) of a Hugging Face repository `llmkube deploy` serves (pure).

People name these models the way llama.cpp does: `org/repo-GGUF:Q4_K_M` (a repository and a
quantization), or the repository and `--file`. A repository of GGUF files holds one file (or one
set of shards) per quantization, and projectors (`mmproj-*.gguf`); llama.cpp needs exactly one model
file. So the repository's file list (the Hub's own) decides: the quantization asked for, or the
only one there is; otherwise the user is told which quantizations exist.
"""

import re
from collections.abc import Iterable
from dataclasses import dataclass

from llmkube.plan.model.source import SourceKind, classify_source

#: a quantization as GGUF file names spell it: Q4_K_M, IQ3_XXS, Q8_0, F16, BF16, ...
_QUANT = re.compile(r"(?i)(?:^|[._-])((?:i?q[0-9](?:_[a-z0-9]+)*)|bf16|f16|f32)(?=[._-]|$)")
_SHARD = re.compile(r"(?i)-(\d{5})-of-(\d{5})\.gguf$")
_SUFFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")


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


def choose_files(repository: str, paths: Iterable[str], quantization: str | None) -> Chosen | str:
    """The model file (or shards) to serve from the repository's file list; else what is wrong."""
    by_quant: dict[str | None, list[str]] = {}
    for path in sorted(paths):
        if _is_model_file(path):
            by_quant.setdefault(quantization_of(path), []).append(path)
    if not by_quant:
        return f'the Hugging Face repository "{repository}" has no GGUF model file (llama.cpp serves GGUF)'
    named = sorted(q for q in by_quant if q is not None)
    if quantization is None:
        if len(by_quant) == 1:
            (only, files), *_ = by_quant.items()
            return Chosen(tuple(files), only)
        return (
            f'the Hugging Face repository "{repository}" has {len(by_quant)} GGUF models: name one as '
            f"{repository}:QUANT ({', '.join(named)}) or with --file"
        )
    chosen = by_quant.get(quantization.upper())
    if not chosen:
        return (
            f'the Hugging Face repository "{repository}" has no {quantization} GGUF file; it has: '
            f"{', '.join(named) or 'files without a quantization in their names (use --file)'}"
        )
    return Chosen(tuple(chosen), quantization.upper())
