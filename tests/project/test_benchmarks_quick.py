"""Every benchmark runs in its ``--quick`` mode: the same code paths as the full run, on tiny inputs, in seconds.

Why: a benchmark runs for minutes to hours and nobody runs it between two measurements, so a library change breaks it
unseen (``encode_speed`` crashed after its first table once: ``limits()`` still called ``encode_batch``, which the
tokenizers had traded for ``encode_ids``). Here each script ``benchmarks/NAME.py`` (every module but the shared
helpers, ``benchmarks.common`` and ``benchmarks/_*.py``) runs as ``python -m benchmarks.NAME --quick --out <tmp>``
with tiny local models where it takes a model, must return normally and must leave a non-empty result in ``<tmp>``.
Scripts run in this process through :func:`runpy.run_module` (as ``__main__``, what ``python -m`` does; one torch
import for all; the environment, the working directory and torch's threads are put back after each) except those that
start the app or set up its state, which run as a ``python -m`` subprocess from the repository root. A new script is
picked up by the glob: it needs a ``--quick`` and an ``--out``, and an entry in :data:`MODEL_ARGS` if it takes a
model.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.paths import REPO_ROOT as ROOT

BENCHMARKS = ROOT / "benchmarks"
SHARED = {"common"}  # the scripts' shared helpers (a package: the glob does not see it), like every benchmarks/_*.py
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if not p.stem.startswith("_") and p.stem not in SHARED)
APP = {"app_latency", "app_soak", "first_result", "app_load", "upload_quota"}  # start `python app.py`
# Run as a subprocess: the app's (a server, its own environment) and score_file (it sets up the app's state here)
# (serving_levers sets torch threads; map_during_warm sets MLSE_CACHE and runs the app's warm start)
SUBPROCESS = APP | {"score_file", "warm_start", "serving_levers", "map_during_warm"}
# Slow (marked so; `pytest -m slow` runs them), measured under load: the app with minilm-en (app_latency 46 CPU-s,
# app_soak 26), the CLI three times and the app's state with minilm-en (score_file 27), the seed-grid experiment twice,
# whose evaluation suite is fixed (seed_grid_time ~100 s alone), score started on a local Ray (scale_score ~50 s).
# Everything else together: ~60 CPU-s.
SLOW = APP | {"score_file", "seed_grid_time", "warm_start", "serving_levers", "scale_score"}
OUT_FILE = {
    "app_latency": "app-latency.json",
    "app_soak": "app-soak.json",
    "finetune_speed": "finetune-speed.json",
    "mining_scale": "mining-scale.json",
    "first_result": "first-result.json",
    "warm_start": "warm-start.json",
    "finetune_gpu": "finetune-gpu.json",
    "app_load": "app-load.json",
    "serving_levers": "serving-levers.json",
    "upload_quota": "upload-quota.json",
    "scale_score": "scale-score.json",
    "scale_mine": "scale-mine.json",
    "map_during_warm": "map-during-warm.json",
}
# (--out names a file for the scripts in OUT_FILE, a folder for the others)
TIMEOUT_S = {"seed_grid_time": 1800}  # a hang guard, not a speed target; 600 s for the others


def _tiny(request) -> str:
    return str(request.getfixturevalue("tiny_bert"))


def _tmp(request, name: str) -> str:
    return str(request.getfixturevalue("tmp_path") / name)


def _tiny_triple(request) -> list[str]:
    tiny = _tiny(request)
    return ["--student", tiny, "--priority-teacher", tiny, "--average-teacher", tiny]


# script -> its arguments besides --quick and --out: tiny local models (each script's own flag), one thread.
# score_file keeps its quick mode's minilm-en: the app's Score a file takes only the models the app lists.
MODEL_ARGS = {
    "app_latency": lambda r: ["--eval-model", _tiny(r)],  # the app itself serves minilm-en, the smallest real model
    "baseline": lambda r: ["--models", _tiny(r)],
    "cache_speedup": lambda r: ["--model", _tiny(r)],
    "contrastive_start": _tiny_triple,
    "encode_speed": lambda r: ["--models", str(r.getfixturevalue("tiny_me5")), "--threads", "1"],
    "explain_faithfulness": lambda r: ["--models", _tiny(r), "--threads", "1"],
    "explain_speed": lambda r: ["--models", _tiny(r), "--threads", "1"],
    "int8_options": lambda r: ["--model", str(r.getfixturevalue("tiny_me5")), "--threads", "1"],
    "finetune_compare": lambda r: ["--student", _tiny(r), "--teacher", _tiny(r), "--runs", _tmp(r, "runs")],
    "finetune_speed": lambda r: ["--student", _tiny(r)],
    "gpu_student": lambda r: ["--student", _tiny(r), "--runs", _tmp(r, "runs")],
    "sts_term_balance": lambda r: ["--model", _tiny(r)],
    "paired_sts": lambda r: ["--a", _tiny(r), "--b", _tiny(r)],
    "forgetting": lambda r: ["--student", _tiny(r), "--reference", _tiny(r)],
    "ensemble_teacher": lambda r: ["--models", f"{_tiny(r)},{_tiny(r)}"],
    "student_soup": lambda r: ["--base", _tiny(r), "--members", f"{_tiny(r)},{_tiny(r)}", "--weights", "0.5,0.5"],
    "multilingual_student": lambda r: ["--student", _tiny(r), "--run", _tmp(r, "run")],
    "muse_speed": lambda r: ["--threads", "1"],
    "seed_grid_time": lambda r: ["--backbone", _tiny(r)],
    "scale_score": lambda r: ["--model", _tiny(r)],
    "map_during_warm": lambda r: ["--model", _tiny(r)],
    "what_if_speed": lambda r: ["--model", _tiny(r), "--threads", "1"],
}


@pytest.fixture(scope="module")
def tiny_me5(tmp_path_factory) -> Path:
    """me5-small's format in miniature (tests/e5_format_writer.py, converted as me5-small is): its tokenizer is the
    pipeline the compact sentencepiece tokenizer serves, so the int8 backend runs on a CompactTokenizer."""
    from mlse.encoders import e5
    from tests.e5_format_writer import build_tiny, write_e5

    spec = build_tiny(seed=0)
    spec.max_positions = 512  # as me5-small: STS sentences are ~100 pieces long on the tiny vocabulary
    spec.tensors["emb.pos"] = (np.random.default_rng(1).standard_normal((512, spec.hidden)) * 0.02).astype(np.float32)
    out = tmp_path_factory.mktemp("me5-tiny") / "me5-tiny"
    out.mkdir()
    e5.convert(write_e5(out.parent / "tiny-q4.bin", spec), out)
    return out


def _param(script: str):
    marks = [pytest.mark.slow] if script in SLOW else []
    return pytest.param(script, marks=marks, id=script)


def _timeout(signum, frame):
    raise TimeoutError("the quick run took too long")


def run_in_process(script: str, argv: list[str], monkeypatch) -> object:
    """``python -m benchmarks.<script> ARGV`` in this process: the module run as ``__main__`` with ``sys.argv`` set;
    the environment, the working directory and torch's thread count are restored afterwards. Returns the exit code
    (None when the script returned normally).

    The processes a script starts get one OpenMP thread, as this process has (tests/conftest.py): beside another
    worker's test, seed_grid_time's two experiment runs took 1,196 s with two threads spinning against it (the same
    quick run beside a 2-thread torch loop: 104 s with one thread, over 580 s with two)."""
    import torch

    monkeypatch.setattr(sys, "argv", [f"python -m benchmarks.{script}", *argv])
    monkeypatch.delitem(sys.modules, f"benchmarks.{script}", raising=False)  # run afresh, as python -m does
    environ, cwd, threads = dict(os.environ), os.getcwd(), torch.get_num_threads()
    os.environ["OMP_NUM_THREADS"] = "1"
    previous = signal.signal(signal.SIGALRM, _timeout)
    signal.alarm(TIMEOUT_S.get(script, 600))
    try:
        runpy.run_module(f"benchmarks.{script}", run_name="__main__", alter_sys=True)
        return None
    except SystemExit as exc:
        return exc.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        os.environ.clear()
        os.environ.update(environ)
        os.chdir(cwd)
        torch.set_num_threads(threads)


def run_subprocess(script: str, argv: list[str]) -> int:
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{script}", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S.get(script, 600),
    )
    assert proc.returncode == 0, f"benchmarks.{script} --quick exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return proc.returncode


@pytest.mark.parametrize("script", [_param(s) for s in SCRIPTS])
def test_quick_mode_runs_and_writes_its_result(script, request, tmp_path, monkeypatch):
    out_dir = tmp_path / "out"
    out = out_dir / OUT_FILE.get(script, "")
    argv = ["--quick", "--out", str(out), *MODEL_ARGS.get(script, lambda r: [])(request)]
    if script in SUBPROCESS:
        code = run_subprocess(script, argv)
    else:
        code = run_in_process(script, argv, monkeypatch)
    assert code in (None, 0), f"benchmarks.{script} --quick returned {code}"
    written = [p for p in out_dir.rglob("*") if p.is_file()]
    assert written and all(p.stat().st_size > 0 for p in written), f"{script}: nothing written to {out_dir}"
    for path in written:
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))  # complete, valid JSON
    if script in ("forgetting", "paired_sts"):  # files committed under results/: model folders and --out portably
        from mlse.data.portable import find_absolute_paths

        assert all(not find_absolute_paths(p.read_text(encoding="utf-8")) for p in written)
    if script == "encode_speed":  # the step that crashed, on the tokenizer it crashed on
        (result,) = [json.loads(p.read_text()) for p in written]
        assert result["quick"] is True and result["limits"]["tokenizer"] == "CompactTokenizer"
        assert result["limits"]["tokenize_sentences_per_s"] > 0 and result["limits"]["sweep"]
        assert set(result["throughput"]) == {"torch", "onnx", "onnx-int8"} and result["accuracy"]


def test_encode_speed_runs_on_a_native_encoder_too(tmp_path, monkeypatch):
    """``encode_speed``'s default models include muse, whose int8 runtime is a graph of its own (no token-id
    tokenizer): its run died in ``limits()`` after the first model's 17 minutes. The packaged muse, quick."""
    out = tmp_path / "out"
    code = run_in_process(
        "encode_speed", ["--quick", "--out", str(out), "--models", "muse", "--threads", "1"], monkeypatch
    )
    assert code in (None, 0)
    (result,) = [json.loads(p.read_text()) for p in out.rglob("*.json")]
    assert "not_applicable" in result["limits"] and result["throughput"]


def test_every_script_is_covered():
    """A script is either run here or named as another task's; the shared helpers are no scripts."""
    assert SCRIPTS and not (SHARED & set(SCRIPTS)) and "mining_scale" in SCRIPTS
    assert (BENCHMARKS / "common" / "__init__.py").is_file()
    assert set(MODEL_ARGS) <= set(SCRIPTS), set(MODEL_ARGS) - set(SCRIPTS)
    assert set(OUT_FILE) | SUBPROCESS | SLOW <= set(SCRIPTS)


def test_quick_output_never_defaults_to_results(tmp_path):
    from benchmarks.common import output_dir, output_file

    quick = output_dir(None, True, "results/x", "x")
    assert quick.is_dir() and ROOT / "results" not in quick.resolve().parents and not any(quick.iterdir())
    assert output_dir(None, False, "results/x") == Path("results/x")
    assert output_dir(tmp_path, True, "results/x") == tmp_path
    quick_file = output_file(None, True, "results/app/app-soak.json")
    assert quick_file.name == "app-soak.json" and quick_file.parent.is_dir() and "results" not in quick_file.parts
    assert output_file(None, False, "results/app/app-soak.json") == Path("results/app/app-soak.json")
    quick.rmdir()
    quick_file.parent.rmdir()
