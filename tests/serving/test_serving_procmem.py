"""Resident memory, and handing freed memory back to the system after a large temporary allocation."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from mlse.serving import procmem
from mlse.serving.procmem import memory_mb, release_free_memory, releases_memory


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim and /proc are Linux's")
def test_freed_memory_goes_back_to_the_system():
    # Start from a trimmed heap: an xdist worker that ran other tests first can hold hundreds of MiB freed but kept,
    # which the blocks below would reuse without the resident size growing (a fresh-clone run saw 2718 -> 2727 MiB).
    release_free_memory()
    before = memory_mb()["rss_mb"]
    # many medium blocks, as an encode leaves them (below glibc's mmap threshold, so free() alone keeps them)
    blocks = [np.ones(16_000, dtype=np.float64) for _ in range(6_000)]  # 6,000 x 125 KiB = 730 MiB
    grown = memory_mb()["rss_mb"]
    del blocks
    assert release_free_memory() is True
    after = memory_mb()["rss_mb"]
    assert grown - before > 500 and after < before + 0.5 * (grown - before), (before, grown, after)


def test_the_decorator_returns_the_result_and_releases_even_on_error(monkeypatch):
    calls = []
    monkeypatch.setattr(procmem, "release_free_memory", lambda: calls.append(1) or True)

    @releases_memory
    def work(x, *, y):
        if x < 0:
            raise ValueError("negative")
        return x + y

    assert work(2, y=3) == 5 and calls == [1]
    with pytest.raises(ValueError, match="negative"):
        work(-1, y=0)
    assert calls == [1, 1] and work.__name__ == "work"


def test_without_glibc_it_is_a_no_op(monkeypatch):
    monkeypatch.setattr(procmem, "_TRIM", False)
    assert release_free_memory() is False
