"""Warm start (mlse.serving.warm, ``python -m mlse warm``): the steps compute what each tab's first press looks up, a
second warm computes nothing, a stopped warm resumes, missing data is skipped with the reason; the status the app's
tabs read while it runs.

The tiny BERT stands in for the default models; the map is projected with PCA on 5 sentences (the tab's own default is
UMAP on 100, checked against the tab's constants in the first test).
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import closing

import pytest

from mlse.cli.main import main
from mlse.data import fetch_status
from mlse.data.stsb import load_sts
from mlse.dirs import cache_root
from mlse.encoders.cache import text_key
from mlse.encoders.torch import SentenceTransformerEncoder
from mlse.serving import pair_scoring, warm
from mlse.serving.app_state import AppState
from mlse.serving.warm import StepStatus, check_steps, run_warm, wait_for_fetch, warm_status
from mlse.serving.warm_plan import tab_openings, umap_step, warm_plan
from mlse.serving.warm_steps import TAB_DEFAULTS, WARM_UP_TEXT, TabDefaults, WarmStep, example_texts, map_languages
from mlse.stop_signal import Stopped, StopSignal
from mlse.text import sentences
from mlse.ui import gold_tab, map_tab, score_tab, tatoeba_tab, tatoeba_views
from mlse.ui.preparing import preparing_note, with_preparing_note
from tests.paths import REPO_ROOT

FAST = TabDefaults(map_sentences=5, map_method="pca")  # the tab's steps, on a map that projects in milliseconds


@pytest.fixture()
def forwards(monkeypatch):
    """Texts each forward pass of a torch encoder was given (what the embedding cache did not serve)."""
    seen: list[list[str]] = []
    real = SentenceTransformerEncoder.encode

    def counting(self, texts, **kwargs):
        seen.append(list(texts))
        return real(self, texts, **kwargs)

    monkeypatch.setattr(SentenceTransformerEncoder, "encode", counting)
    return seen


def cache_files() -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file the warm writes besides the SQLite journals (which a mere read may touch).

    Each database's write-ahead log is first folded into its file: otherwise the next connection to close does it,
    and a warm that writes nothing would still change the file (when depends on which connection closes first)."""
    import sqlite3

    for db in cache_root().rglob("*.sqlite"):
        with closing(sqlite3.connect(db)) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in cache_root().rglob("*")
        if p.is_file() and not p.name.endswith(("-wal", "-shm"))
    }


def steps_for(model, data_dir, defaults=FAST, scope="disk"):
    return warm_plan(AppState(data_dir=str(data_dir)), models=[str(model)], defaults=defaults, scope=scope)


def test_tab_defaults_are_the_tabs_own(data_dir):
    state = AppState(data_dir=str(data_dir))
    assert TAB_DEFAULTS.map_sentences == map_tab.DEFAULT_SENTENCES
    assert map_languages(data_dir) == map_tab.language_choices(state)[1]
    assert (TAB_DEFAULTS.tatoeba_lang, TAB_DEFAULTS.tatoeba_k) == (tatoeba_tab.DEFAULT_LANG, tatoeba_views.MARGIN_K)
    assert TAB_DEFAULTS.sts_pair == gold_tab.DEFAULT_PAIR and TAB_DEFAULTS.example_max_chars == sentences.MAX_CHARS
    shown = [sentences.clean_text(e[side])[0] for e in score_tab.load_examples() for side in ("sentence1", "sentence2")]
    assert example_texts() == list(dict.fromkeys(shown)) and len(example_texts()) > 10
    openings = tab_openings(state)  # what the app and the command hand the plan
    assert openings == {
        "gold": state.preferred_model(),
        "tatoeba": state.preferred_model(),
        "map": map_tab.default_choice(state)[0],
    }
    names = [s.name for s in warm_plan(state, openings=openings, scope="all")]
    ticked = state.default_selection()[0]  # the Score tab's first press scores these
    assert [n for n in names if n.startswith("load:")][: len(ticked)] == [f"load:{m}" for m in ticked]
    assert {"results", f"map:{openings['map']}", f"gold:{openings['gold']}", f"tatoeba:{openings['tatoeba']}"} <= set(
        names
    )
    # UMAP's kernels are compiled before the map's data steps (a cold press then waits for none), by the app and by
    # the command (they are kept on disk, so a Docker build's warm spares the app the compiling)
    assert "umap" in names and names.index("umap") < names.index(f"map:{openings['map']}")
    command = [s.name for s in warm_plan(state, openings=openings)]
    assert "umap" in command and command.index("umap") < command.index(f"map:{openings['map']}")


def test_the_umap_step_compiles_once_per_machine_and_marks_it(monkeypatch):
    from mlse.analysis import umap_process
    from mlse.serving.warm import run_warm
    from mlse.serving.warm_plan import umap_step

    calls = []
    monkeypatch.setattr(umap_process, "compile_kernels", lambda: calls.append(1) or umap_process.kernels_marker())
    report = run_warm([umap_step()])
    assert calls == [1] and [s.state for s in report.steps] == ["computed"]
    umap_process.kernels_marker().parent.mkdir(parents=True, exist_ok=True)
    umap_process.kernels_marker().write_text("compiled")  # what compile_kernels leaves
    report = run_warm([umap_step()])
    assert calls == [1] and [s.state for s in report.steps] == ["warm"]


@pytest.mark.slow
def test_compile_kernels_projects_in_a_child_and_writes_its_marker():
    """In a fresh interpreter: this xdist worker may have imported umap for an earlier test, which would hide an
    import here (the slow tier failed so)."""
    import subprocess
    import sys

    code = (
        "import sys; from mlse.analysis import umap_process; marker = umap_process.compile_kernels(points=60); "
        "print(marker == umap_process.kernels_marker(), marker.is_file(), 'umap' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.stdout.split() == ["True", "True", "False"], done.stderr


def test_umap_is_compiled_at_start_only_when_the_maps_first_press_will_project(monkeypatch, data_dir):
    """After `mlse warm` the map's first view is a file: compiling then (~15 s of both cores) would only hold up the
    first visitors' presses on the other tabs."""
    from mlse.analysis import umap_process
    from mlse.serving.warm import run_warm
    from mlse.serving.warm_plan import umap_step

    calls = []
    monkeypatch.setattr(umap_process, "compile_kernels", lambda: calls.append(1))
    on_disk = {"map": True}
    report = run_warm([umap_step(also_done=lambda: on_disk["map"])])
    assert calls == [] and [s.state for s in report.steps] == ["warm"]
    on_disk["map"] = False  # a cold start: the map's first press will project, so compile now
    report = run_warm([umap_step(also_done=lambda: on_disk["map"])])
    assert calls == [1] and [s.state for s in report.steps] == ["computed"]
    # in the app's plan the umap step also asks the map step's question
    state = AppState(data_dir=str(data_dir))
    plan = {s.name: s for s in warm_plan(state, openings=tab_openings(state), scope="all")}
    map_step = next(s for name, s in plan.items() if name.startswith("map:"))
    assert not plan["umap"].done() and not map_step.done()
    monkeypatch.setattr(map_step, "done", lambda: True)
    assert plan["umap"].done()


def test_warm_computes_what_the_tabs_then_find_and_a_second_warm_does_nothing(tiny_bert, data_dir, forwards):
    name = str(tiny_bert)
    report = run_warm(steps_for(tiny_bert, data_dir))
    states = {s.name.split(":")[0]: s.state for s in report.steps}
    assert states == {
        "files": "warm",
        "examples": "computed",
        "gold": "computed",
        "tatoeba": "computed",
        "map": "computed",
    }, report.steps
    assert forwards and not report.stopped
    before, forwards[:] = cache_files(), []

    again = run_warm(steps_for(tiny_bert, data_dir))
    assert again.all_warm and {s.state for s in again.steps} == {"warm"}
    assert forwards == [] and cache_files() == before  # nothing encoded, nothing written

    # Each tab's first press with its defaults is served by what the warm left (fresh state: no in-process memo);
    # the functions the handlers call for their numbers, without the figures
    state = AppState(data_dir=str(data_dir))
    langs = map_tab.language_choices(state)[1]
    out = map_tab.project_map(state, name, langs, FAST.map_sentences, method=FAST.map_method)
    assert "1 of 1 panels from cache" in out.note, out.note
    assert len(tatoeba_views.tatoeba_view(state, tatoeba_tab.DEFAULT_LANG, name).src) > 100
    assert len(gold_tab.predictions(state, gold_tab.DEFAULT_PAIR, name, "test")[1]) > 100
    first = score_tab.load_examples()[0]
    s1, s2 = (sentences.clean_text(first[side])[0] for side in ("sentence1", "sentence2"))
    assert len(pair_scoring.score_models(state, [name], s1, s2)[0]) == 1
    assert forwards == []

    # A check never computes: with the map's files gone, its step is not done and nothing was projected to say so
    projections = cache_root() / "projections"
    for npz in projections.glob("*.npz"):
        npz.unlink()
    assert [s.state for s in check_steps(steps_for(tiny_bert, data_dir))][-1] == "waiting"
    assert not list(projections.glob("*.npz"))


def test_a_stopped_warm_resumes_where_it_stopped(tiny_bert, data_dir, forwards):
    gold = [s for s in steps_for(tiny_bert, data_dir) if s.name.startswith("gold:")]
    report = run_warm(gold, stop=StopSignal(also=lambda: bool(forwards)))  # stop once a chunk was encoded
    assert report.stopped and report.steps[0].state == "stopped"
    encoded_first = sum(len(t) for t in forwards)
    assert 0 < encoded_first
    forwards[:] = []
    assert check_steps(gold)[0].state == "waiting"  # not done: --check lists it as missing

    resumed = run_warm(gold)
    assert resumed.steps[0].state == "computed"
    encoded_rest = sum(len(t) for t in forwards)
    ds = load_sts(gold_tab.DEFAULT_PAIR, "test", data_dir)
    assert encoded_first + encoded_rest == len(set(ds.s1) | set(ds.s2))  # the finished chunk was not encoded again


def test_every_step_of_the_plan_honours_a_stop_before_it_computes(tiny_bert, data_dir, forwards, monkeypatch):
    """A step that ignored the warm's signal (encoding past it, or loading a model after Stop) would compute here."""
    from mlse.analysis import umap_process

    monkeypatch.setattr(umap_process, "compile_kernels", lambda: pytest.fail("compiled after Stop"))
    monkeypatch.setattr("mlse.runs.results_index.build_index", lambda: pytest.fail("indexed after Stop"))
    state = AppState(data_dir=str(data_dir))
    steps = [*warm_plan(state, models=[str(tiny_bert)], defaults=FAST, scope="all"), umap_step()]  # FAST: no UMAP
    kinds = {step.name.split(":")[0] for step in steps}
    assert kinds == {"files", "examples", "gold", "tatoeba", "map", "umap", "load", "results"}, kinds
    stop = StopSignal()
    stop.set()
    for step in steps:
        with pytest.raises(Stopped, match="stopped while"):
            step.run(lambda fraction, message="": None, stop)
    assert forwards == [] and not state.pool.loaded()  # nothing encoded, no model loaded


def test_the_app_warm_yields_to_visitors_and_ends_on_its_stop_signal(monkeypatch):
    button, seen, asked = StopSignal(), [], []

    def first(progress, stop):
        assert isinstance(stop, StopSignal) and stop is not button  # the warm's own: the button, after the visitors
        assert not stop.should_stop()
        button.set()  # Stop pressed
        seen.append("first")
        stop.check("the first step")

    steps = [_step("first", ("score",), run=first), _step("second", ("score",), run=lambda p, s: seen.append("2"))]
    monkeypatch.setattr("mlse.serving.warm_plan.warm_plan", lambda *a, **k: steps)
    monkeypatch.setattr(warm, "wait_for_foreground", lambda stop: asked.append(stop) or 0.0)
    warm.start_app_warm(None, on_step=lambda status, fraction: None, stop=button).join(60)
    assert seen == ["first"] and asked and all(s is button for s in asked)  # every check waited for the visitors
    assert [s.state for s in warm_status().steps] == ["stopped", "waiting"]


def test_missing_data_and_models_are_skipped_with_the_reason(tiny_bert, tmp_path, monkeypatch):
    empty = tmp_path / "no-data"
    empty.mkdir()
    report = run_warm(steps_for(tiny_bert, empty))
    skipped = {s.name.split(":")[0]: s.note for s in report.steps if s.state == "skipped"}
    assert set(skipped) == {"gold", "tatoeba", "map"}
    assert "stsb_multi_mt" in skipped["gold"] and "tatoeba" in skipped["tatoeba"] and "flores" in skipped["map"]
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf"))
    hub_only = run_warm(warm_plan(AppState(data_dir=str(empty)), models=["labse"], defaults=FAST))
    assert all(s.state == "skipped" and "does not load here" in s.note for s in hub_only.steps)


def test_the_app_also_loads_its_models_and_reads_the_results_index(tiny_bert, tmp_path, monkeypatch, forwards):
    monkeypatch.setenv("MLSE_RESULTS", str(tmp_path / "results"))
    empty = tmp_path / "no-data"
    empty.mkdir()
    state = AppState(data_dir=str(empty))
    report = run_warm(warm_plan(state, models=[str(tiny_bert)], scope="all"))
    states = {s.name.split(":")[0]: s.state for s in report.steps}
    assert states["load"] == "computed" and states["results"] == "computed" and states["examples"] == "computed"
    assert [WARM_UP_TEXT] in forwards and state.pool.loaded()  # run once, past the cache, and held by the app's state
    store = state.encoder(str(tiny_bert)).store(True)
    assert store.get_many([text_key(WARM_UP_TEXT)]) == {} and len(store) == len(example_texts())


def test_the_command_checks_warms_once_and_then_does_nothing(capsys, tiny_bert, tmp_path, forwards, monkeypatch):
    from mlse.analysis import umap_process

    def compiled():  # the real compile runs in test_compile_kernels_projects_in_a_child_and_writes_its_marker
        marker = umap_process.kernels_marker()
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text("compiled")
        return marker

    monkeypatch.setattr(umap_process, "compile_kernels", compiled)
    empty = tmp_path / "no-data"
    empty.mkdir()
    args = ["warm", "--models", str(tiny_bert), "--data-dir", str(empty)]
    assert main([*args, "--check"]) == 1
    out = capsys.readouterr().out
    assert "missing  " in out and "embeddings of the" in out and "skipped  " in out and "2 of 6 steps missing" in out
    assert "UMAP's kernels compiled" in out  # needs no data: a Docker build without the datasets compiles them

    assert main(args) == 0
    out = capsys.readouterr().out
    assert "computed in" in out and "%]" in out and "skipped: " in out and "2 computed" in out
    before, forwards[:] = cache_files(), []

    assert main(args) == 0
    assert "everything is already warm (6 steps, 3 skipped): nothing computed" in capsys.readouterr().out
    assert forwards == [] and cache_files() == before
    assert main([*args, "--check"]) == 0 and "everything is warm" in capsys.readouterr().out
    assert main(["warm", "--models", "no-such-model"]) == 2 and "unknown model" in capsys.readouterr().err


def _step(name, tabs, weight=1.0, run=None, done=False, needs=None, data=False):
    return WarmStep(
        name,
        f"step {name}",
        tabs,
        run or (lambda progress, stop: None),
        done=lambda: done,
        needs=lambda: needs,
        weight=weight,
        data=data,
    )


def test_ctrl_c_stops_cleanly_with_exit_130(capsys, monkeypatch):
    def interrupted(progress, stop):
        os.kill(os.getpid(), signal.SIGINT)  # the command's handler sets its stop signal: no KeyboardInterrupt
        stop.check("encoding (64 of 100 texts done and cached)")

    steps = [_step("a", ("score",), run=interrupted), _step("b", ("map",))]
    monkeypatch.setattr("mlse.serving.warm_plan.warm_plan", lambda *a, **k: steps)
    before = signal.getsignal(signal.SIGINT)
    assert main(["warm"]) == 130
    captured = capsys.readouterr()
    assert "step a: stopped after" in captured.out and "2 step(s) left" in captured.err
    assert signal.getsignal(signal.SIGINT) is before  # the command's handler is put back


def test_a_log_gets_a_line_for_a_running_step_now_and_then(capsys):
    from mlse.cli.warm import _Periodic

    status = StepStatus("map:x", "x: FLORES map", ("map",), 8.0, "running", 0.4, 12.0, "UMAP projection")
    _Periodic(every_s=0.0).show(status, 0.5)
    _Periodic(every_s=3600.0).show(status, 0.5)  # not yet: the first line comes after a while
    assert capsys.readouterr().out == "[ 50 %] x: FLORES map: 40 % after 12 s (UMAP projection)\n"


def test_status_fractions_and_the_preparing_note():
    inside, release = threading.Event(), threading.Event()
    seen = {}

    def slow(progress, stop):
        progress(0.5, "half way")
        seen["status"], seen["score"], seen["map"] = (warm_status(), preparing_note("score"), preparing_note("map"))
        seen["results"] = with_preparing_note("results", "42 numbers.")
        inside.set()
        release.wait(10)

    steps = [
        _step("files", ("score", "map"), weight=2.0, done=True),
        _step("slow", ("map",), weight=4.0, run=slow),
        _step("later", ("score",), weight=2.0),
        _step("skip", ("results",), needs="no data"),
    ]
    thread = threading.Thread(target=run_warm, args=(steps,))
    thread.start()
    assert inside.wait(10)
    release.set()
    thread.join(10)
    status = seen["status"]
    assert status.active and status.current.name == "slow" and status.current.note == "half way"
    assert status.fraction == pytest.approx((2 + 4 * 0.5) / 9)  # weighted: files done, slow half, the rest not
    assert status.tab_fraction("map") == pytest.approx((2 + 2) / 6)
    assert [s.name for s in status.pending("score")] == ["later"] and status.pending("results") == [status.steps[3]]
    assert seen["map"].startswith("⏳ Preparing (67 %)") and "step slow" in seen["map"]
    assert seen["score"].startswith("⏳ Preparing (50 %)")
    assert seen["results"].startswith("⏳ Preparing (0 %)") and seen["results"].endswith("\n\n42 numbers.")
    after = warm_status()
    assert (
        not after.active
        and after.fraction == 1.0
        and [s.state for s in after.steps] == ["warm", "computed", "computed", "skipped"]
    )
    assert preparing_note("map") == "" and with_preparing_note("map", "text") == "text"


def test_the_app_warm_says_preparing_at_once_and_waits_for_its_data_fetch(monkeypatch):
    order, listed = [], threading.Event()

    def plan(*args, **kwargs):
        listed.wait(10)
        return [
            _step("model", ("score",), run=lambda p, s: order.append("model")),
            _step("data", ("gold",), run=lambda p, s: order.append("data"), data=True),
        ]

    monkeypatch.setattr("mlse.serving.warm_plan.warm_plan", plan)
    monkeypatch.setattr(warm, "FETCH_POLL_S", 0.01)
    fetch_status.set_waiting(["flores200"])
    fetch_status.set_running("flores200")
    try:
        thread = warm.start_app_warm(None, on_step=lambda status, fraction: None)
        assert preparing_note("tatoeba").startswith("⏳ Preparing (0 %)")  # before the steps are even listed
        listed.set()
        threading.Timer(0.3, lambda: order.append("fetched") or fetch_status.set_finished("flores200", None)).start()
        thread.join(10)
    finally:
        listed.set()
        fetch_status.set_finished("flores200", None)
    assert order == ["model", "fetched", "data"]
    assert preparing_note("gold") == "" and preparing_note("tatoeba") == ""
    stop = StopSignal()
    stop.set()
    fetch_status.set_waiting(["tatoeba"])
    wait_for_fetch(stop)  # a stopped app does not wait for its fetch
    fetch_status.set_waiting([])


def test_serving_imports_no_ui_and_no_torch():
    import subprocess
    import sys

    code = (
        "import sys, mlse.serving.warm, mlse.serving.warm_plan, mlse.cli.warm; "
        "print(sorted(m for m in sys.modules if m in ('torch', 'gradio') or m.startswith('mlse.ui')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.stdout.strip() == "[]", done.stderr


def test_the_map_tab_draws_the_warmed_map_on_opening_and_never_computes_one(tiny_bert, data_dir, forwards):
    name, state = str(tiny_bert), AppState(data_dir=str(data_dir))
    langs = map_tab.language_choices(state)[1]

    def opened(shown=None):
        return map_tab.open_map(state, name, langs, FAST.map_sentences, shown, method=FAST.map_method)

    assert opened() is None  # cold: looking at the tab starts nothing (the visitor presses Project)
    assert forwards == [] and not list((cache_root() / "projections").glob("*.npz"))
    run_warm([s for s in steps_for(tiny_bert, data_dir) if s.name.startswith(("files:", "map:"))])
    forwards[:] = []
    out = opened()
    assert out is not None and out.figures[0] is not None and "1 of 1 panels from cache" in out.note
    assert forwards == []  # drawn from the cache alone
    assert opened(shown=out) is None  # a map already on screen is left as it is
    assert map_tab.open_map(state, "no-such-model", langs, FAST.map_sentences, method="pca") is None


def test_the_preload_loads_the_score_defaults_whose_files_are_ready(tiny_bert, tmp_path, monkeypatch, forwards):
    from mlse.ui.warm_start import start_preload

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hf"))
    state = AppState()
    # what the Score tab ticks; labse: a hub model never downloaded here, so its files are not ready
    monkeypatch.setattr(state, "default_selection", lambda: ([str(tiny_bert), "labse"], ""))
    start_preload(state).join(timeout=120)
    assert [WARM_UP_TEXT] in forwards  # run once, past the embedding cache
    assert len(state.pool.loaded()) == 1, state.pool.loaded()  # tiny_bert; labse (no files here) waits for a press
