"""The project's documentation is self-contained: every relative link resolves inside the repository
(test_no_outside_references.py holds every file to that)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")


@pytest.mark.parametrize("document", DOCUMENTS, ids=[str(d.relative_to(ROOT)) for d in DOCUMENTS])
def test_links_resolve_inside_the_repository(document: Path) -> None:
    text = document.read_text()
    for target, anchor in LINK.findall(text):
        if "://" in target:
            continue
        resolved = (document.parent / target).resolve()
        assert resolved.exists(), f"{document.name} links to {target}, which does not exist"
        assert ROOT in resolved.parents or resolved == ROOT, f"{document.name} links outside the repository"
        if anchor and resolved.suffix == ".md":
            assert anchor[1:] in anchors(resolved), (
                f"{document.name} links to {target}{anchor}: no such heading"
            )


def anchors(document: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    headings = re.findall(r"^#+ (.+)$", document.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-") for heading in headings}


def test_the_user_documents_exist() -> None:
    names = {d.name for d in DOCUMENTS}
    assert {
        "architecture.md",
        "behaviour.md",
        "compatibility.md",
        "differences.md",
        "operations.md",
        "install.md",
    } <= names


def test_the_readme_is_a_users_and_keeps_the_two_commands() -> None:
    """A user reads the README in five minutes; what a contributor needs is in CONTRIBUTING.md."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.split()) <= 1500
    for command in ("make run ", "make test "):
        assert f"\n{command}" in readme, command
    assert "(CONTRIBUTING.md)" in readme
