"""Project pressed while the app's warm start computes the same map: the press waits for the warm's computation (its
count shown) and draws the warm's result; the map is projected once. Pressed before the warm reaches its map, the
press computes it and the warm finds it done. Meanwhile the tab shows the warm's count and draws the map when ready.

The tiny BERT stands in for the default model; the map is projected with PCA on 5 sentences per language (the tab's
own default is UMAP on 100), and the warm is held inside a step by a gate on its thread's encoder calls.
"""

from __future__ import annotations

import threading
import time

import pytest

from mlse.analysis import projection
from mlse.encoders.torch import SentenceTransformerEncoder
from mlse.serving.app_state import AppState
from mlse.serving.warm import run_warm, warm_status
from mlse.serving.warm_plan import warm_plan
from mlse.serving.warm_steps import TabDefaults, WarmStep
from mlse.ui import map_tab

FAST = TabDefaults(map_sentences=5, map_method="pca")
WARM_THREAD = "warm-under-test"


def wait_until(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


@pytest.fixture()
def held(monkeypatch):
    """The warm thread's encoder calls wait at a gate while ``held.step`` (a step-name prefix) runs; every forward
    pass's texts are recorded, and every projection counted."""

    class Held:
        step = "map:"
        inside = threading.Event()
        release = threading.Event()
        forwards: list[list[str]] = []
        projections: list[int] = []

    real_encode = SentenceTransformerEncoder.encode
    real_project = projection.project_2d_explained

    def encode(self, texts, **kwargs):
        current = warm_status().current
        if threading.current_thread().name == WARM_THREAD and current and current.name.startswith(Held.step):
            Held.inside.set()
            assert Held.release.wait(60)
        Held.forwards.append(list(texts))
        return real_encode(self, texts, **kwargs)

    def project(X, **kwargs):
        Held.projections.append(len(X))
        return real_project(X, **kwargs)

    monkeypatch.setattr(SentenceTransformerEncoder, "encode", encode)
    monkeypatch.setattr(projection, "project_2d_explained", project)
    yield Held
    Held.release.set()


def start_warm(state, name: str, before: list[WarmStep] = ()) -> tuple[threading.Thread, dict]:
    plan = warm_plan(state, models=[name], defaults=FAST, scope="disk")
    steps = [s for s in plan if s.name.startswith("files:")] + list(before)
    steps += [s for s in plan if s.name.startswith("map:")]
    report = {}
    thread = threading.Thread(target=lambda: report.setdefault("warm", run_warm(steps)), name=WARM_THREAD)
    thread.start()
    return thread, report


def press(state, name: str, langs: list[str], messages: list[str]) -> tuple[threading.Thread, dict]:
    out = {}

    def run() -> None:
        out["map"] = map_tab.project_map(
            state, name, langs, FAST.map_sentences, method=FAST.map_method, progress=lambda f, m: messages.append(m)
        )

    thread = threading.Thread(target=run, name="press")
    thread.start()
    return thread, out


def test_project_pressed_during_the_warms_map_waits_for_it_and_projects_once(tiny_bert, data_dir, held):
    name, state = str(tiny_bert), AppState(data_dir=str(data_dir))
    langs = map_tab.language_choices(state)[1]
    n_texts = len(langs) * FAST.map_sentences
    warm, report = start_warm(state, name)
    assert held.inside.wait(60)  # the warm is encoding the map's sentences

    # the tab, opened or polled now: no map yet, the warm's count instead
    out, note = map_tab.warm_view(state, name, langs, FAST.map_sentences, method=FAST.map_method)
    assert out is None and note.startswith("⏳ **Preparing the default map**"), note
    assert f"encoding: 0 / {n_texts} sentences (0%)" in note and "pressing Project now waits" in note
    # other settings are not the warm's map: nothing to say, nothing to wait for
    assert map_tab.warm_view(state, name, langs[:2], FAST.map_sentences, method=FAST.map_method) == (None, "")

    messages: list[str] = []
    pressed, result = press(state, name, langs, messages)
    wait_until(lambda: any("the app's warm start is computing this map" in m for m in messages), "the press to wait")
    assert held.projections == [] and pressed.is_alive()  # the press computes nothing of its own meanwhile
    held.release.set()
    warm.join(60)
    pressed.join(60)

    assert held.projections == [n_texts]  # projected once, by the warm, for both
    encoded = [text for batch in held.forwards for text in batch]
    assert len(encoded) == len(set(encoded))  # and no sentence encoded twice
    shown = result["map"]
    assert shown.result is not None and all(view.from_cache for view in shown.result.views.values())
    assert shown.note.startswith("Drawn from the app's warm start, which was computing this map"), shown.note
    assert [s.state for s in report["warm"].steps] == ["warm", "computed"]
    # the tab's next poll draws it from the cache and stops polling
    out, note = map_tab.warm_view(state, name, langs, FAST.map_sentences, method=FAST.map_method)
    assert out is not None and out.figures[0] is not None and note == ""
    assert held.projections == [n_texts]


def test_project_pressed_before_the_warm_reaches_its_map_computes_it_and_the_warm_finds_it_done(
    tiny_bert, data_dir, held
):
    name, state = str(tiny_bert), AppState(data_dir=str(data_dir))
    langs = map_tab.language_choices(state)[1]

    def other_work(progress, stop) -> None:  # the warm's steps before its map (the gold pairs, say)
        held.inside.set()
        assert held.release.wait(60)

    before = WarmStep("other", "other work", ("gold",), other_work, done=lambda: False)
    warm, report = start_warm(state, name, [before])
    assert held.inside.wait(60)
    out, note = map_tab.warm_view(state, name, langs, FAST.map_sentences, method=FAST.map_method)
    assert out is None and "prepares the default map after its other steps" in note, note

    messages: list[str] = []
    pressed, result = press(state, name, langs, messages)
    pressed.join(60)  # not held up: it computes the map at once
    assert len(held.projections) == 1 and not any("warm start is computing" in m for m in messages)
    assert "Drawn from the app's warm start" not in result["map"].note
    held.release.set()
    warm.join(60)
    # the map found done: not projected again
    assert [s.state for s in report["warm"].steps] == ["warm", "computed", "warm"]
    assert len(held.projections) == 1


def test_the_tab_polls_while_the_warm_prepares_its_map_and_stops_after(tiny_bert, data_dir, held):
    """The handlers as the page wires them (the tab opened, the timer's tick): the note and the timer's state."""
    import gradio as gr

    name, state = str(tiny_bert), AppState(data_dir=str(data_dir))
    langs = map_tab.language_choices(state)[1]
    with gr.Blocks() as demo:
        map_tab.build_tab(state)
    handlers = {fn.fn.__name__: fn for fn in demo.fns.values()}
    poll, opened = handlers["on_poll"], handlers["on_open"]
    assert len(poll.outputs) == len(opened.outputs) and isinstance(poll.outputs[-1], gr.Timer)
    note_at = poll.outputs.index(next(c for c in poll.outputs if isinstance(c, gr.Markdown) and c.value == ""))

    def the_warms_map(progress, stop) -> None:  # stands in for the tab's default map (UMAP on 100)
        progress(0.2, "encoding: 160 / 800 sentences (20%), 8.0 sentences/s, ETA 1m20s")
        held.inside.set()
        assert held.release.wait(60)

    step = WarmStep(f"map:{name}", "the map", ("map",), the_warms_map, done=lambda: False)
    step.request = (map_tab.DEFAULT_SENTENCES, "umap", 0)
    warm = threading.Thread(target=run_warm, args=([step],), name=WARM_THREAD)
    warm.start()
    assert held.inside.wait(60)
    answer = poll.fn(name, langs, map_tab.DEFAULT_SENTENCES, None)
    assert len(answer) == len(poll.outputs) and answer[-1].active is True
    assert "Preparing the default map" in answer[note_at] and "160 / 800 sentences" in answer[note_at]
    held.release.set()
    warm.join(60)
    answer = poll.fn(name, langs, map_tab.DEFAULT_SENTENCES, None)  # nothing cached (the stand-in drew nothing)
    assert answer[-1].active is False and "Preparing" not in str(answer[note_at])
