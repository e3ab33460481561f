"""`llmkube catalog list` and `llmkube catalog info ID`: the shipped catalog as tables (as kubectl
prints them: `-o wide|name|json|yaml`, `--no-headers`) and one entry in full, each with the memory
the controller's estimator says it needs. Neither needs a cluster."""

import argparse
import sys
from typing import Any

from llmkube.plan.inferenceservice.memory_fit import MemoryEstimate, size_text
from llmkube.usercli import render
from llmkube.usercli.catalog.entries import CatalogEntry, estimate, find_entry, load_catalog
from llmkube.usercli.manifests import DeployOptions


def _estimate_dict(found: MemoryEstimate) -> dict[str, Any]:
    parts = {"weights": found.weights, "kvCache": found.kv_cache, "overhead": found.overhead}
    figures: dict[str, Any] = {"totalBytes": found.total, **{f"{k}Bytes": v for k, v in parts.items()}}
    figures["context"] = found.context
    if found.gpu_share:
        figures["gpuBytes"], figures["hostBytes"] = found.gpu_total, found.host_total
    return figures


def entry_document(entry: CatalogEntry) -> dict[str, Any]:
    """An entry as `-o json|yaml` prints it, with both estimates (CPU, and one GPU)."""
    arch = entry.architecture
    document: dict[str, Any] = {
        "id": entry.id,
        "title": entry.title,
        "family": entry.family,
        "parameters": entry.parameters,
        "source": entry.source,
        "files": list(entry.files),
        "quantization": entry.quantization,
        "size": entry.size,
        "sizeBytes": entry.size_bytes,
        "contextLength": entry.context_length,
        "deployContext": entry.default_context,
        "license": entry.license,
        "architecture": {
            "name": arch.name,
            "layers": arch.layers,
            "embedding": arch.embedding,
            "heads": arch.heads,
            "kvHeads": arch.kv_heads,
            "vocab": arch.vocab,
        },
        "memoryEstimate": {
            "cpu": _estimate_dict(estimate(entry)),
            "gpu1": _estimate_dict(estimate(entry, DeployOptions(source=entry.source, gpus=1))),
        },
    }
    if arch.head_size:
        document["architecture"]["headSize"] = arch.head_size
    if entry.mmproj:
        document["mmproj"] = entry.mmproj
        document["mmprojSize"] = entry.mmproj_size
    return document


def list_rows(entries: tuple[CatalogEntry, ...], *, wide: bool) -> list[list[str]]:
    rows = []
    for entry in entries:
        cells = [
            entry.id,
            entry.parameters,
            entry.quantization,
            entry.size,
            str(entry.context_length),
            entry.license,
            size_text(estimate(entry).total),
        ]
        if wide:
            files = [*entry.files, *([entry.mmproj] if entry.mmproj else [])]
            cells += [entry.architecture.name, entry.title, entry.source, ", ".join(files)]
        rows.append(cells)
    return rows


LIST_HEADERS = ["ID", "PARAMS", "QUANT", "SIZE", "CONTEXT", "LICENSE", "MEMORY"]
WIDE_HEADERS = [*LIST_HEADERS, "ARCH", "MODEL", "SOURCE", "FILES"]


def run_catalog_list(args: argparse.Namespace) -> int:
    entries = load_catalog()
    if args.output in ("json", "yaml"):
        render.dump({"models": [entry_document(e) for e in entries]}, args.output)
        return 0
    if args.output == "name":
        sys.stdout.write("".join(f"{entry.id}\n" for entry in entries))
        return 0
    wide = args.output == "wide"
    table = render.plain_table(WIDE_HEADERS if wide else LIST_HEADERS, list_rows(entries, wide=wide))
    table.show_header = not args.no_headers
    render.emit(table)
    return 0


def _memory_line(found: MemoryEstimate) -> str:
    parts = f"weights {size_text(found.weights)} + KV {size_text(found.kv_cache)} + overhead "
    return f"{size_text(found.total)} ({parts}{size_text(found.overhead)}, {found.context} tokens of context)"


def info_facts(entry: CatalogEntry) -> list[tuple[str, str]]:
    arch = entry.architecture
    cpu = estimate(entry)
    gpu = estimate(entry, DeployOptions(source=entry.source, gpus=1))
    head = f", head size {arch.head_size}" if arch.head_size else ""
    facts = [
        ("ID", entry.id),
        ("Model", f"{entry.title} ({entry.parameters} parameters, {entry.family})"),
        ("Source", entry.source),
        ("Files", ", ".join(entry.files)),
    ]
    if entry.mmproj:
        facts.append(("Projector", f"{entry.mmproj} ({entry.mmproj_size}; llama.cpp --mmproj)"))
    facts += [
        ("Quantization", entry.quantization),
        ("Size", f"{entry.size} (the model card's)"),
        ("Context", f"{entry.context_length} tokens trained; deployed with {entry.default_context}"),
        ("License", entry.license),
        (
            "Architecture",
            f"{arch.name}: {arch.layers} layers, embedding {arch.embedding}, {arch.heads} heads, "
            f"{arch.kv_heads} KV heads{head}, vocabulary {arch.vocab}",
        ),
        ("Memory (CPU)", _memory_line(cpu)),
        (
            "Memory (--gpu 1)",
            f"{size_text(gpu.gpu_total)} on the GPU, {size_text(gpu.host_total)} in host memory",
        ),
        ("Deploy", f'llmkube deploy {entry.id}   (Model and InferenceService "{entry.object_name}")'),
    ]
    return facts


def run_catalog_info(args: argparse.Namespace) -> int:
    entry = find_entry(args.id)
    if entry is None:
        print(
            f'error: "{args.id}" is not in the catalog (llmkube catalog list shows its ids)', file=sys.stderr
        )
        return 1
    if args.output in ("json", "yaml"):
        render.dump(entry_document(entry), args.output)
        return 0
    render.emit(render.facts_table(info_facts(entry)))
    return 0
