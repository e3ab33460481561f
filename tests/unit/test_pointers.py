"""Every file a comment, docstring or document points at exists: a pointer left behind by a move
sends the reader nowhere. A pointer is a path whose first folder is one of the repository's or the
package's (`tests/unit/test_docs.py`, `kube/apply/applier.py`), or a manifest's; paths of other
projects (the reference's `config/samples/...`, Kubernetes' `api/openapi-spec/...`), the wheel's
bundle and the reference's own samples, kept unchanged, are not ours to check."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "llmkube"
POINTER = re.compile(r"(?<![\w./$-])((?:[\w-]+/)+[\w-]+\.(?:py|sh|md|yaml|json|toml))\b")
#: what the repository holds at its root and in the package: a pointer starts with one of these
OURS = {p.name for p in ROOT.iterdir() if p.is_dir()} | {p.name for p in PACKAGE.iterdir() if p.is_dir()}
#: first folders of ours that name someone else's file in these places
OTHERS = ("llmkube/_bundled/", "api/openapi-spec/")
#: the reference's samples, byte for byte (their comments point into the reference's tree)
UNCHANGED = {"manifests/samples/metal/inferenceservice_turboquant.yaml"}
SCANNED = ("llmkube", "tests", "hack", "bench", "docs", "charts", "manifests", ".ci")


def _documents() -> list[Path]:
    found = [
        ROOT / name for name in ("README.md", "CONTRIBUTING.md", "Makefile", "Dockerfile", "pyproject.toml")
    ]
    for folder in SCANNED:
        found += [
            path
            for path in (ROOT / folder).rglob("*")
            if path.suffix in (".py", ".md", ".sh", ".yaml", ".toml") and "__pycache__" not in path.parts
        ]
    return found


def test_every_pointer_names_a_file_that_exists() -> None:
    stale: list[str] = []
    for document in _documents():
        if str(document.relative_to(ROOT)) in UNCHANGED:
            continue
        for match in POINTER.finditer(document.read_text(errors="replace")):
            pointer = match.group(1)
            if pointer.split("/", 1)[0] not in OURS or pointer.startswith(OTHERS):
                continue
            bases = (ROOT, PACKAGE, ROOT / "manifests", ROOT / "tests" / "support", *document.parents)
            if not any((base / pointer).exists() for base in bases):
                stale.append(f"{document.relative_to(ROOT)}: {pointer}")
    assert stale == []


def test_no_two_test_modules_share_a_name() -> None:
    """pytest imports test modules by their base name (rootdir-relative imports): a second
    `test_x.py` anywhere under tests/ stops the whole suite at collection, in whichever pass meets
    both. Caught here, in the first seconds of the unit tests."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
