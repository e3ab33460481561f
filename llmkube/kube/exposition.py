"""The `/metrics` answer: a prometheus_client registry, followed by families that render themselves,
in the text format (0.0.4) or, when the scraper asks for it (Accept), OpenMetrics: the negotiation
is prometheus_client's own (`choose_encoder`), as its HTTP handlers do. The rendered families are
gauges, whose lines are the same in both formats; OpenMetrics ends the answer with `# EOF`.

The client's generic path builds a Sample and a label dict per series and validates and escapes
every label at every scrape: about 8 us a series. Per-object gauges at 10,000 objects are 170,000
series, so a scrape took 2.9 s of CPU and allocated 81 MiB before the answer was sent. A family
that knows its series can instead keep what it derived per object and write the lines itself
(`Renderer`): the registry keeps everything else (counters, histograms, the process metrics), and
its duplicate-name check (a rendered family's names are never registered with it).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, choose_encoder

__all__ = [
    "TEXT",
    "Format",
    "Renderer",
    "add_renderer",
    "escape_label_value",
    "exposition",
    "exposition_chunks",
    "family_header",
    "negotiate",
]

_OPENMETRICS = "application/openmetrics-text"
_EOF = b"# EOF\n"


@dataclass(frozen=True)
class Format:
    """What the answer is sent as: its Content-Type and the registry's encoder for it."""

    content_type: str
    encode: Callable[[CollectorRegistry], bytes]

    @property
    def openmetrics(self) -> bool:
        return self.content_type.startswith(_OPENMETRICS)


#: The text format, for a scraper that asks for nothing in particular.
TEXT = Format(CONTENT_TYPE_PLAIN_0_0_4, generate_latest)


def negotiate(accept: str | None) -> Format:
    """The format for a request's Accept header, chosen as prometheus_client chooses it."""
    encode, content_type = choose_encoder(accept or "")
    return Format(content_type, encode)


#: writes whole families (HELP, TYPE and every sample) in the text format, in pieces of any size
Renderer = Callable[[], Iterable[str]]

_renderers: weakref.WeakKeyDictionary[CollectorRegistry, list[Renderer]] = weakref.WeakKeyDictionary()


def add_renderer(render: Renderer, registry: CollectorRegistry = REGISTRY) -> Callable[[], None]:
    """Append ``render``'s families to ``registry``'s answer; returns the function that removes it."""
    renderers = _renderers.setdefault(registry, [])
    renderers.append(render)
    return lambda: renderers.remove(render)


def exposition_chunks(registry: CollectorRegistry = REGISTRY, fmt: Format = TEXT) -> Iterator[bytes]:
    """The registry's families, then every renderer's, in pieces to send as they come: the whole
    answer at 10,000 services is 16 MB, and joined (then encoded) it would be held two or three
    times over."""
    head = fmt.encode(registry)
    # OpenMetrics' `# EOF` ends the whole answer, after the rendered families.
    yield head.removesuffix(_EOF) if fmt.openmetrics else head
    for render in list(_renderers.get(registry, ())):
        for chunk in render():
            yield chunk.encode()
    if fmt.openmetrics:
        yield _EOF


def exposition(registry: CollectorRegistry = REGISTRY, fmt: Format = TEXT) -> bytes:
    """The whole answer in one piece (for tests and tools)."""
    return b"".join(exposition_chunks(registry, fmt))


def escape_label_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def family_header(name: str, help_text: str, kind: str = "gauge") -> str:
    escaped = help_text.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {name} {escaped}\n# TYPE {name} {kind}\n"
