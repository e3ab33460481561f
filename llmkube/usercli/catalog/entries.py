"""The catalog's entries (models.yaml), what `deploy ID` applies for each, and the memory each
needs by the controller's own estimator (pure: the file is read once, nothing else).

An entry carries the figures the estimator reads from a GGUF header (layers, embedding width,
heads, key/value heads, head size, vocabulary) and the file size the model card lists; the
estimate is made from a Model whose status holds them, exactly as the controller estimates a
Model whose header it read (plan/inferenceservice/memory_fit.py). No figure of memory is stored.
"""

import functools
import re
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any

import yaml

from llmkube.api.inferenceservice import InferenceServiceSpec
from llmkube.api.model import GGUFMetadata, Model, ModelStatus
from llmkube.plan.inferenceservice.memory_fit import MemoryEstimate, estimate_memory
from llmkube.usercli.manifests import DeployOptions, build_manifests

CATALOG_FILE = "models.yaml"
#: The context `deploy ID` asks for unless --context-size says otherwise: the trained context, at
#: most this (a 128k context's KV cache is many times the weights of a small model).
DEFAULT_CONTEXT_CAP = 8192
_SIZE = re.compile(r"^(?P<number>\d+(?:\.\d+)?) (?P<unit>MB|GB)$")
_DECIMAL = {"MB": 10**6, "GB": 10**9}
_ID = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")


class CatalogError(ValueError):
    """The catalog file is not what this module expects (a packaging mistake, caught by tests)."""


@dataclass(frozen=True)
class Architecture:
    name: str
    layers: int
    embedding: int
    heads: int
    kv_heads: int
    vocab: int
    head_size: int | None = None  # when it is not embedding / heads (Gemma, Mistral Nemo)


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    title: str
    family: str
    parameters: str
    source: str
    files: tuple[str, ...]
    quantization: str
    size: str  # as the model card lists it, e.g. "4.68 GB"
    context_length: int  # the trained context
    license: str
    architecture: Architecture
    mmproj: str | None = None
    mmproj_size: str | None = None

    @property
    def size_bytes(self) -> int:
        """The model file's bytes (decimal units, as the Hub lists them)."""
        return decimal_bytes(self.size)

    @property
    def download_bytes(self) -> int:
        """Every staged file together (the model and its projector)."""
        return self.size_bytes + (decimal_bytes(self.mmproj_size) if self.mmproj_size else 0)

    @property
    def default_context(self) -> int:
        return min(self.context_length, DEFAULT_CONTEXT_CAP)

    @property
    def object_name(self) -> str:
        """The Model's and the service's name: the id as a DNS label (`qwen2.5-7b` -> `qwen2-5-7b`)."""
        return self.id.replace(".", "-")


def decimal_bytes(text: str) -> int:
    match = _SIZE.match(text)
    if match is None:
        raise CatalogError(f'size "{text}" is not like "4.68 GB" or "669 MB"')
    return round(float(match["number"]) * _DECIMAL[match["unit"]])


def _entry(raw: dict[str, Any]) -> CatalogEntry:
    try:
        arch = dict(raw["architecture"])
        architecture = Architecture(
            name=str(arch.pop("name")),
            layers=int(arch.pop("layers")),
            embedding=int(arch.pop("embedding")),
            heads=int(arch.pop("heads")),
            kv_heads=int(arch.pop("kvHeads")),
            vocab=int(arch.pop("vocab")),
            head_size=int(arch.pop("headSize")) if "headSize" in arch else None,
        )
        if arch:
            raise CatalogError(f"unknown architecture fields {sorted(arch)}")
        known = {
            "id", "title", "family", "parameters", "source", "files", "quantization", "size",
            "contextLength", "license", "architecture", "mmproj", "mmprojSize",
        }  # fmt: skip
        unknown = set(raw) - known
        if unknown:
            raise CatalogError(f"unknown fields {sorted(unknown)}")
        entry = CatalogEntry(
            id=str(raw["id"]),
            title=str(raw["title"]),
            family=str(raw["family"]),
            parameters=str(raw["parameters"]),
            source=str(raw["source"]),
            files=tuple(str(f) for f in raw["files"]),
            quantization=str(raw["quantization"]),
            size=str(raw["size"]),
            context_length=int(raw["contextLength"]),
            license=str(raw["license"]),
            architecture=architecture,
            mmproj=str(raw["mmproj"]) if raw.get("mmproj") else None,
            mmproj_size=str(raw["mmprojSize"]) if raw.get("mmprojSize") else None,
        )
    except (KeyError, TypeError, ValueError) as error:
        raise CatalogError(f"catalog entry {raw.get('id', '?')!r}: {error}") from error
    if not _ID.match(entry.id):
        raise CatalogError(f'catalog id "{entry.id}": lowercase letters, digits, "." and "-"')
    decimal_bytes(entry.size)
    return entry


def parse_catalog(text: str) -> tuple[CatalogEntry, ...]:
    document = yaml.safe_load(text)
    if not isinstance(document, dict) or not isinstance(document.get("models"), list):
        raise CatalogError('the catalog is a mapping with a "models" list')
    entries = tuple(_entry(raw) for raw in document["models"])
    ids = [entry.id for entry in entries]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise CatalogError(f"catalog ids listed twice: {', '.join(duplicates)}")
    return entries


@functools.cache
def load_catalog() -> tuple[CatalogEntry, ...]:
    """The catalog shipped in the package."""
    text = resources.files("llmkube.usercli.catalog").joinpath(CATALOG_FILE).read_text(encoding="utf-8")
    return parse_catalog(text)


def find_entry(entry_id: str, catalog: tuple[CatalogEntry, ...] | None = None) -> CatalogEntry | None:
    for entry in catalog if catalog is not None else load_catalog():
        if entry.id == entry_id.strip().lower():
            return entry
    return None


def deploy_options(entry: CatalogEntry, base: DeployOptions | None = None) -> DeployOptions:
    """The options `deploy ID` builds from: the entry's source, files, projector, quantisation and
    context, under whatever else the command line asked (its --name and --context-size win)."""
    base = base or DeployOptions(source=entry.source)
    return replace(
        base,
        source=entry.source,
        files=entry.files,
        mmproj=entry.mmproj,
        name=base.name or entry.object_name,
        quantization=base.quantization or entry.quantization,
        context_size=base.context_size or entry.default_context,
    )


def gguf_of(entry: CatalogEntry) -> GGUFMetadata:
    """What the controller would read from the entry's GGUF header, as far as the card says."""
    arch = entry.architecture
    return GGUFMetadata(
        architecture=arch.name,
        quantization=entry.quantization,
        context_length=entry.context_length,
        embedding_size=arch.embedding,
        layer_count=arch.layers,
        head_count=arch.heads,
        head_count_kv=arch.kv_heads,
        key_length=arch.head_size,
        value_length=arch.head_size,
        vocab_size=arch.vocab,
        license=entry.license,
    )


def estimate(entry: CatalogEntry, options: DeployOptions | None = None) -> MemoryEstimate:
    """The controller's estimate for the service `deploy ID` (with these options) would create:
    the Model it applies, with the status the controller would give it (the header's figures, the
    file's size), and the service's own spec (context, slots, KV cache types, GPUs)."""
    model_obj, service_obj = build_manifests(deploy_options(entry, options))
    model = Model.model_validate(model_obj).model_copy(
        update={"status": ModelStatus(gguf=gguf_of(entry), source_content_length=entry.download_bytes)}
    )
    spec = InferenceServiceSpec.model_validate(service_obj["spec"])
    gpus = spec.resources.gpu if spec.resources is not None and spec.resources.gpu else 0
    result = estimate_memory(model, spec, gpu_count=gpus)
    if result is None:  # every entry has the figures: a test holds the catalog to it
        raise CatalogError(f"catalog entry {entry.id!r} has no figures to estimate from")
    return result
