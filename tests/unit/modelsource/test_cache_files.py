import errno
import os
import tempfile
import time
from pathlib import Path

import pytest

from llmkube.controllers.modelsource import (
    find_cached_file,
    place_canonically,
    remove_cached_files,
    rename_no_replace,
)
from llmkube.controllers.modelsource.cachefiles import remove_stale_temp_files
from llmkube.plan.model import CachedFile


@pytest.mark.parametrize(
    ("names", "preferred", "picked"),
    [
        ([], "Tiny.gguf", None),
        (["model.gguf"], "Tiny.gguf", "model.gguf"),
        (["model.gguf", "Tiny.gguf"], "Tiny.gguf", "Tiny.gguf"),  # canonical beats legacy
        (["b.gguf", "a.gguf", "model.gguf"], "Tiny.gguf", "a.gguf"),  # else the first other name
        (["a.gguf", "Tiny.gguf"], "Tiny.gguf", "Tiny.gguf"),  # canonical beats the lexicographic first
        ([".model-x.tmp", ".m.gguf.etag", "notes.txt"], "Tiny.gguf", None),  # temp files, markers, others
        ([".hidden.gguf"], "Tiny.gguf", None),
    ],
)
def test_find_cached_file(tmp_path: Path, names: list[str], preferred: str, picked: str | None) -> None:
    for index, name in enumerate(names):
        (tmp_path / name).write_bytes(b"x" * (index + 1))
    found = find_cached_file(str(tmp_path), preferred)
    if picked is None:
        assert found is None
    else:
        size = names.index(picked) + 1
        assert found == CachedFile(path=str(tmp_path / picked), size=size)
        assert found.basename == picked


def test_directories_and_missing_directories_hold_no_model(tmp_path: Path) -> None:
    (tmp_path / "dir.gguf").mkdir()
    assert find_cached_file(str(tmp_path), "dir.gguf") is None
    assert find_cached_file(str(tmp_path / "absent"), "m.gguf") is None
    (tmp_path / "file").write_text("x")
    assert find_cached_file(str(tmp_path / "file"), "m.gguf") is None


def test_remove_cached_files_keeps_everything_else(tmp_path: Path) -> None:
    for name in ("a.gguf", "model.gguf", ".model-1.tmp", ".a.gguf.etag", "readme.txt"):
        (tmp_path / name).write_text("x")
    removed = remove_cached_files(str(tmp_path))
    assert sorted(removed) == [str(tmp_path / "a.gguf"), str(tmp_path / "model.gguf")]
    assert sorted(os.listdir(tmp_path)) == [".a.gguf.etag", ".model-1.tmp", "readme.txt"]
    assert remove_cached_files(str(tmp_path / "absent")) == []


def test_rename_no_replace(tmp_path: Path) -> None:
    source, target = tmp_path / "a", tmp_path / "b"
    source.write_text("new")
    target.write_text("old")
    assert rename_no_replace(str(source), str(target)) is False
    assert (source.read_text(), target.read_text()) == ("new", "old")
    target.unlink()
    assert rename_no_replace(str(source), str(target)) is True
    assert (source.exists(), target.read_text()) == (False, "new")
    with pytest.raises(FileNotFoundError):
        rename_no_replace(str(tmp_path / "missing"), str(tmp_path / "c"))


def test_place_canonically(tmp_path: Path) -> None:
    legacy = tmp_path / "model.gguf"
    legacy.write_text("m")
    assert place_canonically(str(legacy), "model.gguf") == str(legacy)  # already there
    assert place_canonically(str(legacy), "Tiny.gguf") == str(tmp_path / "Tiny.gguf")
    other = tmp_path / "model.gguf"
    other.write_text("other")
    assert place_canonically(str(other), "Tiny.gguf") == str(other)  # taken: stays put
    assert (tmp_path / "Tiny.gguf").read_text() == "m"


@pytest.mark.skipif(
    not os.path.isdir("/dev/shm") or os.stat("/dev/shm").st_dev == os.stat(tempfile.gettempdir()).st_dev,
    reason="needs two filesystems",
)
def test_rename_no_replace_across_filesystems(tmp_path: Path) -> None:
    # An existing target is refused even across filesystems (link checks EEXIST first). A free
    # target makes link fail with EXDEV, which takes the fallback meant for filesystems without
    # hard links; its rename cannot cross filesystems either, and says so instead of copying.
    with tempfile.NamedTemporaryFile(dir="/dev/shm") as other_fs:
        taken = tmp_path / "taken"
        taken.write_text("old")
        assert rename_no_replace(other_fs.name, str(taken)) is False
        assert taken.read_text() == "old"
        with pytest.raises(OSError) as raised:  # and a rename cannot cross filesystems either
            rename_no_replace(other_fs.name, str(tmp_path / "free"))
        assert raised.value.errno == errno.EXDEV


def test_stale_temp_copies_are_swept_and_fresh_ones_kept(tmp_path: Path) -> None:
    stale = tmp_path / ".model-abandoned.tmp"
    fresh = tmp_path / ".model-inflight.tmp"
    model = tmp_path / "model.gguf"
    for path in (stale, fresh, model):
        path.write_bytes(b"x")
    hour_ago = time.time() - 3600
    os.utime(stale, (hour_ago, hour_ago))
    os.utime(model, (hour_ago, hour_ago))
    assert remove_stale_temp_files(str(tmp_path)) == [str(stale)]
    assert sorted(os.listdir(tmp_path)) == [".model-inflight.tmp", "model.gguf"]
    assert remove_stale_temp_files(str(tmp_path / "missing")) == []
