"""The serving process's collector: survivors of a load frozen out of full scans, cycles freed again on eviction, and
nothing changed in a process that did not ask for it."""

from __future__ import annotations

import gc
import threading
import weakref

import pytest

from mlse.serving import gc_freeze
from mlse.serving.encoder_pool import free_memory
from mlse.serving.model_pool import ModelPool


class _Node:
    def __init__(self):
        self.me = self  # a reference cycle: only the cycle collector frees it


@pytest.fixture
def freezing():
    gc_freeze.enable()
    yield
    gc_freeze.enable(False)  # hands every frozen object back


def _tracked_in_full_scans(obj) -> bool:
    return any(o is obj for o in gc.get_objects(generation=2))


def test_off_by_default_nothing_is_frozen():
    before = gc.get_freeze_count()
    assert gc_freeze.freeze_survivors() == 0 and gc.get_freeze_count() == before


def test_survivors_leave_the_full_scans_and_new_objects_stay_in_them(freezing):
    kept = [1, 2, 3]
    gc.collect()
    assert _tracked_in_full_scans(kept)
    assert gc_freeze.freeze_survivors() > 0
    assert not _tracked_in_full_scans(kept)
    made_after = [4, 5, 6]
    gc.collect()
    assert _tracked_in_full_scans(made_after)


def test_a_frozen_cycle_is_freed_when_an_eviction_collects(freezing):
    node = _Node()
    probe = weakref.ref(node)
    gc_freeze.freeze_survivors()
    del node
    gc.collect()
    assert probe() is not None  # frozen: the collector does not see the cycle
    free_memory()  # what an eviction calls: unfreeze, collect, freeze again
    assert probe() is None and gc.get_freeze_count() > 0


def test_disabling_hands_every_frozen_object_back(freezing):
    gc_freeze.freeze_survivors()
    gc_freeze.enable(False)
    assert gc.get_freeze_count() == 0


def test_the_pool_freezes_after_each_load(tiny_bert, freezing, monkeypatch):
    calls = []
    real = gc_freeze.freeze_survivors
    monkeypatch.setattr(gc_freeze, "freeze_survivors", lambda: calls.append(1) or real())
    pool = ModelPool(max_memory="1GB")
    first = pool.get(str(tiny_bert))
    assert len(calls) == 1 and not _tracked_in_full_scans(first)
    assert pool.get(str(tiny_bert)) is first and len(calls) == 1  # served from the pool: nothing new to freeze


def test_a_freeze_right_after_a_freeze_does_not_walk_everything_again(freezing, monkeypatch):
    collections = []
    here = threading.get_ident()

    def count(phase, info):
        if phase == "start" and threading.get_ident() == here:  # not another thread's own collections
            collections.append(info["generation"])

    gc_freeze.freeze_survivors()
    gc.callbacks.append(count)
    try:
        # nothing made in between: no full collection. The collector's counts are the process's, and a thread the
        # worker runs (execnet's, one an earlier test left) may allocate meanwhile; they read as a quiet process's
        with monkeypatch.context() as quiet:
            quiet.setattr(gc, "get_count", lambda: (0, 0, 0))
            gc_freeze.freeze_survivors()
        assert 2 not in collections
        made = [[i] for i in range(1000)]  # many new container objects: the next freeze collects first
        gc_freeze.freeze_survivors()
        assert 2 in collections and not _tracked_in_full_scans(made)
    finally:
        gc.callbacks.remove(count)
