"""mlse.atomic.atomic_dir: a folder is replaced all or nothing, and nothing hidden is left behind."""

from __future__ import annotations

import pytest

from mlse.atomic import atomic_dir


def test_a_finished_block_replaces_the_folder(tmp_path):
    target = tmp_path / "run"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with atomic_dir(target) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".")  # hidden: model scans skip it
        (tmp / "new.txt").write_text("new")
        assert (target / "old.txt").exists()  # the old folder stays readable until the swap
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["run"]


def test_a_failing_block_leaves_the_old_folder_and_no_leftovers(tmp_path):
    target = tmp_path / "run"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError, match="half way"):
        with atomic_dir(target) as tmp:
            (tmp / "partial.txt").write_text("partial")
            raise RuntimeError("half way")
    assert (target / "old.txt").read_text() == "old" and not (target / "partial.txt").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["run"]
