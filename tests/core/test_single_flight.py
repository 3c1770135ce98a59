"""single_flight: a second caller of the same key waits for the first; other keys do not; errors release the key."""

from __future__ import annotations

import threading

import pytest

from mlse.single_flight import held_keys, single_flight


def test_a_second_caller_waits_and_another_key_does_not():
    inside, release, order = threading.Event(), threading.Event(), []

    def first():
        with single_flight("k"):
            inside.set()
            release.wait(10)
            order.append("first done")

    def second():
        with single_flight("k", on_wait=lambda: order.append("second waits")):
            order.append("second runs")

    a = threading.Thread(target=first)
    a.start()
    assert inside.wait(10)
    b = threading.Thread(target=second)
    b.start()
    with single_flight("other"):  # not held up by "k"
        order.append("other runs")
    while "second waits" not in order:
        threading.Event().wait(0.01)
    release.set()
    a.join(10)
    b.join(10)
    at = order.index
    assert at("other runs") < at("first done")  # another key ran while "k" was held
    assert at("second waits") < at("first done") < at("second runs")  # the second ran only after the first
    assert held_keys() == []


def test_an_error_inside_releases_the_key():
    with pytest.raises(ValueError):
        with single_flight("k"):
            raise ValueError("boom")
    assert held_keys() == []
    with single_flight("k", on_wait=lambda: pytest.fail("nobody holds k")):
        pass
