"""Local sources are opened without following a symbolic link out of --model-local-roots, against
the real file system: links, `..`, absolute paths outside, a stand-in for the service-account
token, and the race where a directory is swapped for a link while it is opened."""

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from llmkube.controllers.modelsource import copy_local_model_sync, probe_local_fingerprint_sync
from llmkube.plan.model import FetchError, FetchFailure, ProbeFailure, StoredFile
from llmkube.sources import EscapesRoots, confined, open_beneath_roots


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """root/ (the allowed directory) and outside/ (a token and weights nobody allowed)."""
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    for directory in (root / "models", root / "hf" / "blobs", root / "hf" / "snapshots" / "rev", outside):
        directory.mkdir(parents=True)
    (root / "models" / "tiny.gguf").write_bytes(b"GGUF allowed weights")
    (root / "hf" / "blobs" / "sha").write_bytes(b"GGUF blob")
    (root / "hf" / "snapshots" / "rev" / "m.gguf").symlink_to(Path("../../blobs/sha"))
    token = outside / "var" / "run" / "secrets" / "kubernetes.io" / "serviceaccount"
    token.mkdir(parents=True)
    (token / "token").write_text("eyJhbGciOi.secret")
    (outside / "other-tenant.gguf").write_bytes(b"GGUF not yours")
    return {"root": root, "outside": outside, "token": token / "token"}


def read_all(path: Path, roots: tuple[str, ...]) -> bytes:
    descriptor = open_beneath_roots(str(path), roots)
    with os.fdopen(descriptor, "rb") as file:
        return file.read()


def test_files_inside_and_links_that_stay_inside_are_read(layout: dict[str, Path]) -> None:
    roots = (str(layout["root"]),)
    assert read_all(layout["root"] / "models" / "tiny.gguf", roots) == b"GGUF allowed weights"
    # A Hugging Face cache: snapshots/<rev>/<file> is a relative link into blobs/.
    assert read_all(layout["root"] / "hf" / "snapshots" / "rev" / "m.gguf", roots) == b"GGUF blob"


def test_a_root_that_is_itself_a_link_is_followed(layout: dict[str, Path], tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(layout["root"])
    assert read_all(alias / "models" / "tiny.gguf", (str(alias),)) == b"GGUF allowed weights"


@pytest.mark.parametrize(
    "make_path",
    [
        # a file link to the token
        lambda layout: _link(layout["root"] / "models" / "token.gguf", layout["token"]),
        # a directory link, and a path through it
        lambda layout: (
            _link(layout["root"] / "models" / "elsewhere", layout["outside"]) / "other-tenant.gguf"
        ),
        # `..` that climbs out (the planner refuses it lexically; the I/O side on its own too)
        lambda layout: layout["root"] / "models" / ".." / ".." / "outside" / "other-tenant.gguf",
        # an absolute path outside
        lambda layout: layout["outside"] / "other-tenant.gguf",
        # a link to the real service-account token location: the controller's own credentials
        lambda layout: _link(
            layout["root"] / "sa.gguf", Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
        ),
    ],
    ids=["file-link", "directory-link", "dot-dot", "absolute-outside", "service-account-token"],
)
def test_paths_that_lead_out_are_refused(
    layout: dict[str, Path], make_path: Callable[[dict[str, Path]], Path], tmp_path: Path
) -> None:
    path = make_path(layout)
    roots = (str(layout["root"]),)
    with pytest.raises(EscapesRoots):
        open_beneath_roots(str(path), roots)

    cache = tmp_path / "cache"
    copied = copy_local_model_sync(str(path), str(cache), "m", roots=roots)
    assert isinstance(copied, FetchError)
    assert copied.kind is FetchFailure.ESCAPES_ROOTS
    assert f'local model source "{path}" is not allowed' in copied.message
    assert f"--model-local-roots: {layout['root']}" in copied.message
    assert not cache.exists() or os.listdir(cache) == []  # not a byte copied
    probe = probe_local_fingerprint_sync(str(path), roots)
    assert (probe.fingerprint, probe.failure) == (None, ProbeFailure.PERMISSION_DENIED)


def _link(link: Path, target: Path) -> Path:
    link.symlink_to(target)
    return link


def test_with_no_roots_nothing_is_opened(layout: dict[str, Path]) -> None:
    with pytest.raises(EscapesRoots):
        open_beneath_roots(str(layout["root"] / "models" / "tiny.gguf"), ())


def test_a_sibling_sharing_the_prefix_is_outside(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data2").mkdir()
    (tmp_path / "data2" / "m.gguf").write_bytes(b"x")
    with pytest.raises(EscapesRoots):
        open_beneath_roots(str(tmp_path / "data2" / "m.gguf"), (str(tmp_path / "data"),))


@pytest.mark.parametrize("swapped", ["directory", "file"])
def test_an_element_swapped_for_a_link_after_resolution_is_not_followed(
    layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch, swapped: str
) -> None:
    """The race: the path resolved cleanly, then (before the open) a directory or the file itself
    became a link out of the root. The element-by-element O_NOFOLLOW open refuses it."""
    root = layout["root"]
    if swapped == "directory":
        path = root / "models" / "other-tenant.gguf"
        (root / "models" / "tiny.gguf").unlink()
        (root / "models").rmdir()
        (root / "models").symlink_to(layout["outside"])
    else:
        path = root / "models" / "tiny.gguf"
        path.unlink()
        path.symlink_to(layout["token"])
    # realpath ran before the swap: it saw plain directories and a plain file.
    monkeypatch.setattr(confined.os.path, "realpath", lambda p: os.path.normpath(p))
    with pytest.raises(EscapesRoots, match="replaced by a symbolic link"):
        open_beneath_roots(str(path), (str(root),))


def test_a_fifo_does_not_block_the_open_and_is_not_a_model(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.gguf"
    os.mkfifo(fifo)
    result = copy_local_model_sync(str(fifo), str(tmp_path / "cache"), "m", roots=(str(tmp_path),))
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.NOT_A_FILE


def test_a_missing_file_under_a_root_is_not_found(layout: dict[str, Path], tmp_path: Path) -> None:
    missing = layout["root"] / "models" / "absent.gguf"
    result = copy_local_model_sync(str(missing), str(tmp_path / "cache"), "m", roots=(str(layout["root"]),))
    assert isinstance(result, FetchError)
    assert result.kind is FetchFailure.NOT_FOUND


def test_a_copy_through_an_inside_link_works(layout: dict[str, Path], tmp_path: Path) -> None:
    source = layout["root"] / "hf" / "snapshots" / "rev" / "m.gguf"
    result = copy_local_model_sync(str(source), str(tmp_path / "cache"), "m", roots=(str(layout["root"]),))
    assert isinstance(result, StoredFile)
    assert Path(result.path).read_bytes() == b"GGUF blob"
