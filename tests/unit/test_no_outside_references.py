"""Every tracked file stands on its own: nothing points at documents a clone does not have.

A comment, docstring or page that says "see section 3.2 of some notes", "decision 7", "item 5 of
issue 11" or "#606" sends a reader of a fresh clone to something that is not there: the team's
design notes, the behaviour notes of the reference operator, its tracker. The fact belongs in
the comment itself or in `docs/` (what we reproduce of the reference operator, and why, is in
docs/compatibility.md). A URL is fine: anyone can follow it.
"""

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Each pattern names a kind of pointer out of the repository.
OUTSIDE_REFERENCES: dict[str, re.Pattern[str]] = {
    "a section sign (numbered sections of notes outside the repository)": re.compile("\u00a7"),
    # In prose (the word, then a number with or without "#") and in names (joined by underscores).
    "a numbered design decision": re.compile(r"(?<![a-z])decisions?[\s_]+#?\d", re.IGNORECASE),
    "a numbered issue or item of a tracker": re.compile(
        r"(?<![a-z])issues?[\s_]+#?\d|(?<![-a-z])items?[\s_]+\d+\b(?![-/])", re.IGNORECASE
    ),
    "a bare #number (an issue or pull request without its URL)": re.compile(r"(?<![\w&/#])#\d+\b"),
    "a notes file that is not in the repository": re.compile(
        r"reference[-_]behaviou?r|design[-_]decisions|controller[-_]semantics|build[-_]notes",
        re.IGNORECASE,
    ),
    "the team's directory beside a checkout": re.compile(r"\.\./shared\b|\bshared/(?:docs|spec)\b"),
    "an appendix of notes outside the repository": re.compile(r"\bappendix\s+[a-z]\b", re.IGNORECASE),
}

# A URL may carry any of the above (an anchor, an issue number): a reader can follow it.
URL = re.compile(r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://\S+", re.IGNORECASE)
# A word each pattern needs, in lower case: a search that starts with a literal is fast, one that
# starts with \b or a look-behind tries every position (seconds over the repository). Only the
# lines holding one of these are matched against the patterns.
CANDIDATE = re.compile(r"\u00a7|#\d|decision|issue|item|behavio|semantics|notes|shared|appendix")


def tracked_files() -> list[Path]:
    """The files git tracks (a checkout's own files: no virtualenv, caches or build output), but
    this one, whose examples are the very pointers it looks for."""
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    this_file = Path(__file__).resolve()
    return [ROOT / name for name in listing.split("\0") if name and ROOT / name != this_file]


def outside_references(text: str) -> list[tuple[int, str, str]]:
    """(line number, what kind of pointer, the line) for every pointer out of the repository."""
    if not CANDIDATE.search(text.lower()):
        return []
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not CANDIDATE.search(line.lower()):
            continue
        without_urls = URL.sub("", line)
        for kind, pattern in OUTSIDE_REFERENCES.items():
            if pattern.search(without_urls):
                found.append((number, kind, line.strip()))
    return found


def test_no_tracked_file_points_outside_the_repository() -> None:
    offenders = []
    for path in tracked_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files, and files deleted from the work tree but not yet from git
        for number, kind, line in outside_references(text):
            offenders.append(f"{path.relative_to(ROOT)}:{number}: {kind}: {line[:120]}")
    assert not offenders, f"{len(offenders)} references to documents outside the repository:\n" + "\n".join(
        offenders
    )


def test_the_check_finds_each_kind_and_spares_urls() -> None:
    """The patterns themselves: each kind of pointer is found, the ordinary text and URLs are not."""
    found = [
        "reference \u00a73.2.1",
        # Joined at run time, so that no scan of this file finds these pointers in it.
        "(deci" + "sion #13)",
        "design decision 17",
        "def test_custom_class_is_used_deci" + "sion_7",
        "decisions #1, #3",
        "(issue 11, item 5)",
        "Issue 14's measurement",
        "issue #405",
        "item 6: fairness",
        "kopf #275",
        "the duplicate (#1384).",
        "reference-" + "behaviour.md",
        "design-" + "decisions.md",
        "controller-" + "semantics.md",
        "build-" + "notes.md",
        "../sha" + "red/spec/x.json",
        "sha" + "red/docs",
        "reference Appendix B",
    ]
    spared = [
        "https://github.com/kubernetes/kubernetes/issues/117399",
        "see https://github.com/defilantech/llmkube/pull/606#discussion_r1",
        "Content-Range: items 0-1/2",
        "an issuer of tokens",
        "decisions are pure functions",
        "reissue 3 times",
        "colour #fff and entity &#123;",
        "a reference operator's label",
        "",
    ]
    for text in found:
        assert outside_references(text), text
    for text in spared:
        assert not outside_references(text), text
