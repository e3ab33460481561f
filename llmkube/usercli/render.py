"""Terminal output of the user commands (rich tables and colours), and `-o json|yaml` for scripts.

Tables follow kubectl's look (no borders, upper-case headers) so they read the same as
`kubectl get`; on a terminal phases are coloured, in a pipe they are plain text on wide lines.
"""

import json
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

import yaml
from rich.console import Console
from rich.table import Table
from rich.text import Text

from llmkube.kube.resource import Resource
from llmkube.usercli import jsonpath
from llmkube.usercli.views import ConditionRow, EventRow, ModelRow, QueueRow, ServiceRow

PHASE_STYLES = {
    "Ready": "green",
    "Progressing": "green",
    "Creating": "cyan",
    "Pending": "cyan",
    "Downloading": "cyan",
    "Copying": "cyan",
    "WaitingForGPU": "yellow",
    "Stopped": "dim",
    "Suspended": "dim",
    "Failed": "bold red",
}
# Width of output that is not a terminal: lines are not wrapped, like kubectl's.
PIPE_WIDTH = 400


def make_console(stream: TextIO | None = None) -> Console:
    stream = stream or sys.stdout
    terminal = stream.isatty()
    width = None if terminal or os.environ.get("COLUMNS") else PIPE_WIDTH
    return Console(file=stream, width=width, soft_wrap=not terminal, highlight=False)


def emit(renderable: Any, stream: TextIO | None = None) -> None:
    """Print to a terminal as rich does; to a pipe as plain lines without trailing blanks."""
    console = make_console(stream)
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    console.file.write(text + "\n")


def phase_text(phase: str) -> Text:
    return Text(phase, style=PHASE_STYLES.get(phase, ""))


def _table(*headers: str, show_header: bool = True) -> Table:
    table = Table(
        box=None,
        show_edge=False,
        pad_edge=False,
        header_style="bold",
        padding=(0, 3, 0, 0),
        show_header=show_header,
    )
    for header in headers:
        table.add_column(header, no_wrap=True)
    return table


def plain_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> Table:
    """A kubectl-style table of ready-made cells."""
    table = _table(*headers)
    for row in rows:
        table.add_row(*row)
    return table


def services_table(
    rows: Sequence[ServiceRow], *, all_namespaces: bool, wide: bool, headers: bool = True
) -> Table:
    columns = ["NAME", "MODEL", "PHASE", "REASON", "REPLICAS", "QUEUE", "PRIORITY"]
    if wide:
        columns.append("ENDPOINT")
    columns.append("AGE")
    table = _table(*(["NAMESPACE"] if all_namespaces else []), *columns, show_header=headers)
    for row in rows:
        cells: list[str | Text] = [row.name, row.model, phase_text(row.phase), row.reason, row.replicas]
        cells += [row.queue, row.priority]
        if wide:
            cells.append(row.endpoint)
        cells.append(row.age)
        table.add_row(*([row.namespace] if all_namespaces else []), *cells)
    return table


def models_table(rows: Sequence[ModelRow], *, all_namespaces: bool, headers: bool = True) -> Table:
    columns = ["NAME", "PHASE", "SIZE", "QUANT", "ARCH", "ACCELERATOR", "AGE"]
    table = _table(*(["NAMESPACE"] if all_namespaces else []), *columns, show_header=headers)
    for row in rows:
        cells: list[str | Text] = [row.name, phase_text(row.phase), row.size, row.quantization]
        cells += [row.architecture, row.accelerator, row.age]
        table.add_row(*([row.namespace] if all_namespaces else []), *cells)
    return table


def cache_table(rows: Sequence[Any], *, all_namespaces: bool) -> Table:
    """`llmkube cache list`: rows of usercli/cache.py's CacheRow."""
    headers = ["MODEL", "STATE", "CACHE KEY", "FILES", "SIZE", "USED BY"]
    table = _table(*(["NAMESPACE"] if all_namespaces else []), *headers)
    for row in rows:
        cells: list[str | Text] = [row.model, phase_text(row.state), row.cache_key, row.files, row.size]
        table.add_row(*([row.namespace] if all_namespaces else []), *cells, row.used_by)
    return table


def queue_table(rows: Sequence[QueueRow], *, headers: bool = True) -> Table:
    table = _table(
        "POSITION",
        "NAMESPACE",
        "NAME",
        "PRIORITY",
        "VALUE",
        "WAITING FOR",
        "WAITING",
        "REASON",
        show_header=headers,
    )
    for row in rows:
        table.add_row(
            str(row.position),
            row.namespace,
            row.name,
            row.priority,
            row.effective_priority,
            row.waiting_for,
            row.waiting,
            row.reason,
        )
    return table


def facts_table(pairs: Iterable[tuple[str, str]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for label, value in pairs:
        table.add_row(f"{label}:", phase_text(value) if label == "Phase" else value)
    return table


def conditions_table(rows: Sequence[ConditionRow]) -> Table:
    table = _table("KIND", "TYPE", "STATUS", "REASON", "AGE", "MESSAGE")
    table.columns[-1].no_wrap = False
    for row in rows:
        bad = row.status == "True" if row.type in _BAD_WHEN_TRUE else row.status == "False"
        style = "yellow" if bad and row.type != "Progressing" else ""
        table.add_row(row.kind, row.type, Text(row.status, style=style), row.reason, row.age, row.message)
    return table


# Conditions whose "True" is bad news (the others are bad when "False", except Progressing).
_BAD_WHEN_TRUE = frozenset({"Degraded", "SourceDrifted"})


def events_table(rows: Sequence[EventRow]) -> Table:
    table = _table("TYPE", "REASON", "OBJECT", "AGE", "COUNT", "MESSAGE")
    table.columns[-1].no_wrap = False
    for row in rows:
        style = "yellow" if row.type == "Warning" else ""
        table.add_row(Text(row.type, style=style), row.reason, row.kind, row.age, str(row.count), row.message)
    return table


def dump(data: Any, fmt: str, stream: TextIO | None = None) -> None:
    """`-o json` / `-o yaml` (several documents for a list of objects in YAML) / `-o jsonpath=...`."""
    out = stream or sys.stdout
    if fmt.startswith("jsonpath="):
        out.write(jsonpath.render(fmt.partition("=")[2], data))
        return
    if fmt == "json":
        out.write(json.dumps(data, indent=2, sort_keys=False) + "\n")
        return
    if isinstance(data, list):
        out.write("---\n".join(yaml.safe_dump(doc, sort_keys=False) for doc in data))
    else:
        out.write(yaml.safe_dump(data, sort_keys=False))


def names(objects: Iterable[Any], resource: Resource, stream: TextIO | None = None) -> None:
    """`-o name`: `<kind>.<group>/<name>` in lower case, as kubectl prints it."""
    out = stream or sys.stdout
    prefix = f"{resource.kind.lower()}.{resource.group}" if resource.group else resource.kind.lower()
    for obj in objects:
        out.write(f"{prefix}/{(obj.get('metadata') or {}).get('name')}\n")


def object_list(items: Sequence[Any]) -> dict[str, Any]:
    """kubectl's shape for `-o json` of several objects."""
    return {"apiVersion": "v1", "kind": "List", "items": list(items)}
