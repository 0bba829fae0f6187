"""cbmm.io: atomic, all-or-nothing writes that honour the umask."""

from __future__ import annotations

import json
import os
import stat

import numpy as np
import pandas as pd
import pytest

from cbmm.io import atomic_path, atomic_paths, write_csv, write_json, write_text


@pytest.fixture
def umask():
    """Set the process umask for one test."""
    saved = os.umask(0o022)
    yield os.umask
    os.umask(saved)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask,expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_files_honour_the_umask(tmp_path, umask, mask, expected):
    umask(mask)
    write_text("hello", tmp_path / "a.txt")
    write_json({"x": 1}, tmp_path / "b.json")
    write_csv(pd.DataFrame({"x": [1, 2]}), tmp_path / "new" / "c.csv")
    with atomic_path(tmp_path / "d.npz") as tmp:
        np.savez(tmp, x=np.arange(3))
    for name in ("a.txt", "b.json", "new/c.csv", "d.npz"):
        assert mode(tmp_path / name) == expected, name
    assert mode(tmp_path / "new") == 0o777 & ~mask  # a folder made for an output


def test_writers_write_what_they_are_given(tmp_path):
    write_csv(pd.DataFrame({"x": [1, 2]}), tmp_path / "sub" / "t.csv")
    assert (tmp_path / "sub" / "t.csv").read_text().splitlines() == ["x", "1", "2"]
    write_text("héllo", tmp_path / "t.tex")
    assert (tmp_path / "t.tex").read_bytes() == "héllo".encode()
    write_json({"a": [1, 2.5]}, tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text()) == {"a": [1, 2.5]}
    assert (tmp_path / "t.json").read_text().endswith("\n")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["sub", "t.csv", "t.json", "t.tex"]


def test_a_failed_write_leaves_everything_as_it_was(tmp_path):
    (tmp_path / "keep.txt").write_text("old")
    with pytest.raises(ValueError, match="Out of range float values"):
        write_json({"x": float("nan")}, tmp_path / "new" / "deeper" / "x.json")
    with pytest.raises(RuntimeError):
        with atomic_paths([tmp_path / "keep.txt", tmp_path / "other" / "y.txt"]) as (a, b):
            a.write_text("new")
            b.write_text("new")
            raise RuntimeError("disk full")
    # the folders made for the outputs are gone again, the old file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
    assert (tmp_path / "keep.txt").read_text() == "old"


def test_several_files_appear_together_at_the_end(tmp_path):
    targets = [tmp_path / "out" / "a.csv", tmp_path / "out" / "b.json"]
    with atomic_paths(targets) as temporaries:
        for tmp in temporaries:
            tmp.write_text("data")
            assert tmp.parent == tmp_path / "out" and tmp.name.startswith(".")
        assert temporaries[0].suffix == ".csv" and temporaries[1].suffix == ".json"
        assert not any(t.exists() for t in targets)
    assert all(t.read_text() == "data" for t in targets)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["a.csv", "b.json"]


def test_an_existing_folder_is_not_removed_on_failure(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(RuntimeError):
        with atomic_path(tmp_path / "out" / "x.txt", suffix=".tmp") as tmp:
            assert tmp.suffix == ".tmp"
            raise RuntimeError
    assert (tmp_path / "out").is_dir() and not list((tmp_path / "out").iterdir())


def test_a_folder_that_refuses_new_files_is_reported_by_the_file_asked_for(tmp_path,
                                                                           monkeypatch):
    # as root on a pseudo file system (e.g. /sys), a folder can pass os.access and still
    # refuse a new file: the error names the output, not its temporary sibling
    def refuse(path, *args):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(PermissionError) as caught:
        write_text("text", tmp_path / "out.txt")
    assert caught.value.filename == str(tmp_path / "out.txt")
    assert list(tmp_path.iterdir()) == []
