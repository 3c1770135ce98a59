"""Model lists across tabs: the state's version, picker updates, hub models offered only while the hub answers."""

from __future__ import annotations

import http.server
import shutil
import socket
import threading

import pytest

from mlse.data import hub_probe
from mlse.encoders.catalogue import BACKBONE, STUDENT
from mlse.serving.app_state import AppState
from mlse.train.runner import JobRunner
from mlse.ui.model_pickers import ModelPicker, kept_value, picker_choices, picker_updates

HANG_S = 60  # a hang guard, not a speed target: every wait below ends on an event or a short timeout


@pytest.fixture()
def hub_answer():
    """Set the remembered hub answer for one test; forgotten afterwards so no other test sees it."""
    yield hub_probe.remember
    hub_probe.remember(None)


def add_student(runs, tiny_bert, name: str) -> None:
    shutil.copytree(tiny_bert, runs / name / "model")
    (runs / name / "finetune_config.json").write_text("{}")
    (runs / name / "metrics.json").write_text("{}")  # a finished run (without it the run is marked partial)


def test_kept_value_keeps_what_is_still_offered():
    names = ["a", "b", "c"]
    assert kept_value(names, "b", multi=False) == "b"
    assert kept_value(names, "gone", multi=False) == "a"
    assert kept_value([], "gone", multi=False) is None
    assert kept_value(names, ["c", "gone", "a"], multi=True) == ["c", "a"]
    assert kept_value(names, ["gone"], multi=True) == ["a"]
    assert kept_value(names, None, multi=True) == ["a"]


def test_a_new_run_bumps_the_version_and_updates_every_picker(tiny_bert, monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    state = AppState()
    pickers = [ModelPicker("one"), ModelPicker("many", multi=True, labelled=True)]
    seen = state.version
    assert picker_updates(state, pickers, seen, ["minilm-en", ["minilm-en"]]) == (seen, None)  # nothing new

    add_student(tmp_path, tiny_bert, "fresh")
    state.refresh()  # what a finished fine-tune does
    version, updates = picker_updates(state, pickers, seen, ["minilm-en", ["minilm-en"]])
    assert version == seen + 1
    assert "runs/fresh" in updates[0]["choices"] and updates[0]["value"] == "minilm-en"  # the user's pick is kept
    labelled = dict((name, label) for label, name in updates[1]["choices"])
    assert labelled["runs/fresh"] == f"runs/fresh · {STUDENT} (trained here)" and updates[1]["value"] == ["minilm-en"]
    assert picker_updates(state, pickers, version, ["minilm-en", ["minilm-en"]]) == (version, None)

    shutil.rmtree(tmp_path / "fresh")  # a deleted run leaves the lists, and a picker pointing at it moves on
    state.refresh()
    version, updates = picker_updates(state, pickers, version, ["runs/fresh", ["runs/fresh"]])
    assert "runs/fresh" not in updates[0]["choices"] and updates[0]["value"] == updates[0]["choices"][0]
    assert updates[1]["value"] == [updates[1]["choices"][0][1]]


def test_a_rescan_that_finds_the_same_models_keeps_the_version(monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    state = AppState()
    state.refresh()
    before = state.version
    state.refresh()
    assert state.version == before


def test_scorers_only_picker_offers_scorers_only(monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    monkeypatch.setenv("MLSE_ASSETS", str(tmp_path / "no-assets"))  # no shipped heads either: no scorer at all
    state = AppState()
    assert "minilm-en" in picker_choices(state, ModelPicker("x"))
    assert picker_choices(state, ModelPicker("x", scorers_only=True)) == []


def test_a_finished_job_rescans_through_the_runner_hook(tiny_bert, monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    state = AppState()
    state.refresh()
    before = state.version
    runner = JobRunner(on_finish=lambda job: state.refresh())
    runner.submit("make-run", lambda report, stop: add_student(tmp_path, tiny_bert, "made"))
    assert runner.wait(60)
    assert state.version == before + 1 and "runs/made" in state.model_names()


def test_a_failing_finish_hook_does_not_wedge_the_runner():
    def broken(job):
        raise RuntimeError("hook bug")

    runner = JobRunner(on_finish=broken)
    first = runner.submit("a", lambda report, stop: 1)
    assert runner.wait(30) and first.state == "finished" and first.result == 1
    second = runner.submit("b", lambda report, stop: 2)
    assert runner.wait(30) and second.result == 2


# -- hub models -----------------------------------------------------------------------------------------------------
def test_hub_models_are_offered_only_while_the_hub_answers(hub_answer, monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    hub_answer(False)
    state = AppState()
    assert "labse" not in state.model_names() and "xlmr" not in state.model_names()

    hub_answer(True)
    models = {m.name: m for m in state.refresh()}
    assert models["labse"].needs_download and models["labse"].kind == BACKBONE
    assert "downloads on first use" in models["xlmr"].label
    assert not models["minilm-en"].needs_download
    selected, _ = state.default_selection()
    assert "labse" not in selected and "xlmr" not in selected  # never downloaded by a default click
    assert state.model_names().index("minilm-en") < state.model_names().index("labse")  # offline ones first


class _Answer404(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):  # noqa: N802 (http.server's naming)
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_probe_counts_any_http_answer_as_reachable(monkeypatch):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer404)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        assert hub_probe.probe_hub(timeout=5) is True
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the user's word wins over the network
        assert hub_probe.probe_hub(timeout=5) is False
    finally:
        server.shutdown()


def test_probe_of_a_closed_port_is_unreachable(monkeypatch):
    from mlse.serving.http_server import free_port

    port = free_port()  # a port nobody listens on
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    assert hub_probe.probe_hub(timeout=3) is False


def test_probe_of_a_silent_server_gives_up_after_its_timeout(monkeypatch):
    """A server that accepts the connection and never answers: the probe's timeout ends the wait (without it, the
    probe would hang here for ever; the join below is only a guard against that)."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # the kernel accepts the connection; nobody reads or answers
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{silent.getsockname()[1]}")
    answers: list[bool] = []
    probe = threading.Thread(target=lambda: answers.append(hub_probe.probe_hub(timeout=0.2)), daemon=True)
    try:
        probe.start()
        probe.join(HANG_S)
        assert answers == [False]
    finally:
        silent.close()


def test_background_probe_remembers_its_answer(hub_answer, monkeypatch):
    answered = threading.Event()

    def probe(timeout=hub_probe.TIMEOUT_SECONDS):
        answered.wait(HANG_S)  # answers once the test has looked
        return True

    monkeypatch.setattr(hub_probe, "probe_hub", probe)
    hub_answer(None)
    assert hub_probe.hub_reachable() is None  # not known yet: the caller does not wait
    threads = [t for t in threading.enumerate() if t.name == "mlse-hub-probe"]
    assert len(threads) == 1
    assert hub_probe.hub_reachable() is None  # asked again while it runs: still no wait, and no second probe
    assert [t for t in threading.enumerate() if t.name == "mlse-hub-probe"] == threads
    answered.set()
    threads[0].join(HANG_S)
    assert hub_probe.hub_reachable() is True


def test_the_app_wires_one_poll_for_every_picker(monkeypatch, tmp_path):
    monkeypatch.setenv("MLSE_RUNS", str(tmp_path))
    from mlse.ui.app import build_app

    demo = build_app(AppState())
    polls = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "on_tick" and len(fn.outputs) > 5]
    assert len(polls) == 1
    outputs = {getattr(block, "label", None) for block in polls[0].outputs}
    assert {"Models", "Scorer", "Scorer A", "Scorer B", "Scorers", "Model"} <= outputs
