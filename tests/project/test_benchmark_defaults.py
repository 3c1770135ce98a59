"""Every benchmark's default path, and every registered encoder kind through it, in quick mode on stand-ins.

tests/project/test_benchmarks_quick.py runs each script in quick mode on tiny models named by flag, so the models a
script takes by default were never run: ``python -m benchmarks.encode_speed`` with no arguments died on ``muse`` (whose
runtime has no token-id tokenizer) after its first model's 17 minutes, and nothing had run that path. Here the
registry's names load stand-ins (tests/stand_in_models.py: a tiny model in me5-small's format, the tiny BERT as
minilm-en, the tiny LaBSE and XLM-R in a local hub cache, the packaged muse itself), in this process and in every
process a script starts, and each script that takes a model runs ``--quick --out <tmp>``

- with no model argument: its default path (``test_default_path``);
- with every registered name it accepts: in one run where its flag takes a list (``test_every_kind``), once per
  name where it takes one (``test_each_kind``).

The fast tier runs the few that cost little and reach what nothing else does (:data:`FAST_DEFAULT`,
:data:`FAST_EVERY_KIND`); the rest is slow-marked (``pytest -m slow``, ``MLSE_SLOW=1 .ci/run``). Scripts without a
model flag run on their defaults in tests/project/test_benchmarks_quick.py already. A script run here must return
normally and write a non-empty result.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlse.errors import MlseError, ModelNotFoundError
from tests.project.test_benchmarks_quick import OUT_FILE, SLOW, SUBPROCESS, run_in_process, run_subprocess
from tests.stand_in_models import REGISTERED, build, child_environment, install

TRAINABLE = tuple(n for n in REGISTERED if n != "muse")  # muse is frozen: refused as a student
# script -> (its model flag, the names it accepts there, whether the flag takes a comma-separated list)
MODEL_FLAG: dict[str, tuple[str, tuple[str, ...], bool]] = {
    "baseline": ("--models", REGISTERED, True),
    "encode_speed": ("--models", REGISTERED, True),
    "explain_speed": ("--models", REGISTERED, True),
    "explain_faithfulness": ("--models", REGISTERED, True),
    "ensemble_teacher": ("--models", REGISTERED, True),
    "long_field": ("--models", REGISTERED, True),
    "cache_speedup": ("--model", REGISTERED, False),
    "int8_options": ("--model", REGISTERED, False),
    "paired_sts": ("--b", REGISTERED, False),
    "forgetting": ("--reference", REGISTERED, False),
    "sts_term_balance": ("--model", TRAINABLE, False),
    "finetune_compare": ("--student", TRAINABLE, False),
    "finetune_speed": ("--student", TRAINABLE, False),
    "gpu_student": ("--student", TRAINABLE, False),
    "multilingual_student": ("--student", TRAINABLE, False),
    "contrastive_start": ("--student", TRAINABLE, False),
    "what_if_speed": ("--model", REGISTERED, False),
    "map_during_warm": ("--model", REGISTERED, False),
}
# what a script needs besides its models: one thread where it takes a thread count; a folder for its runs
EXTRA = {
    "encode_speed": lambda tmp: ["--threads", "1"],
    "explain_speed": lambda tmp: ["--threads", "1"],
    "explain_faithfulness": lambda tmp: ["--threads", "1"],
    "int8_options": lambda tmp: ["--threads", "1"],
    "what_if_speed": lambda tmp: ["--threads", "1"],
    "paired_sts": lambda tmp: ["--a", "minilm-en"],  # required: A has no default
    "forgetting": lambda tmp: ["--student", "minilm-en"],  # its default is the shipped student, no stand-in
    "finetune_compare": lambda tmp: ["--runs", str(tmp / "runs")],
    "gpu_student": lambda tmp: ["--runs", str(tmp / "runs")],
    "multilingual_student": lambda tmp: ["--run", str(tmp / "run")],
}
# (script, name) -> what the script says when it refuses that model, as it should: a clear error, no traceback from
# deep inside. The students of these scripts are given WordPiece vocabulary extension (me5-small and XLM-R use a
# SentencePiece unigram model), and finetune_compare's mse run needs the teacher's (minilm-en's) dimension.
NOT_WORDPIECE = "vocabulary extension supports WordPiece"
REFUSED = {
    **{
        (s, n): NOT_WORDPIECE
        for s in ("finetune_compare", "finetune_speed", "multilingual_student")
        for n in ("me5-small", "xlmr")
    },
    ("finetune_compare", "labse"): "needs equal teacher and student dimensions",
    ("int8_options", "muse"): "muse has no ONNX export",  # its runtime is a graph of its own: nothing to quantise
}
# Failures this test found and left for their owners to fix (strict: the mark fails once they pass).
BROKEN: dict[tuple[str, str | None], str] = {}
# In the fast tier: the default paths that reach another kind than tests/project/test_benchmarks_quick.py's tiny BERT
# (which is minilm-en's stand-in, so a default of minilm-en runs there already) at a few CPU-seconds: paired_sts (B:
# muse) and ensemble_teacher (muse and me5-small); and encode_speed on every kind in one run (~25 CPU-s), the path that
# crashed. Together with building the stand-ins about 45 CPU-s; everything else here is slow-marked.
FAST_DEFAULT = {"paired_sts", "ensemble_teacher"}
FAST_EVERY_KIND = {"encode_speed"}


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory, tiny_bert, tiny_labse, tiny_xlmr):
    return build(tmp_path_factory.mktemp("stand-ins"), tiny_bert, tiny_labse, tiny_xlmr)


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory) -> Path:
    """One cache for the module: me5-small's stand-in is converted and muse's table written once, not per test."""
    return tmp_path_factory.mktemp("mlse-cache")


@pytest.fixture()
def with_stand_ins(stand_ins, shared_cache, tmp_path, monkeypatch):
    install(stand_ins, monkeypatch.setattr, monkeypatch.setenv)
    for key, value in child_environment(stand_ins, tmp_path / "site").items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MLSE_CACHE", str(shared_cache))
    return stand_ins


def run(script: str, models: list[str], tmp_path: Path, monkeypatch) -> list[Path]:
    """``python -m benchmarks.SCRIPT --quick --out OUT`` with ``models`` on its model flag (none: its default);
    returns the files it wrote, each checked to be non-empty (and valid JSON where it is JSON)."""
    flag, _, is_list = MODEL_FLAG[script]
    out_dir = tmp_path / "out"
    argv = ["--quick", "--out", str(out_dir / OUT_FILE.get(script, "")), *EXTRA.get(script, lambda t: [])(tmp_path)]
    if models:
        argv += [flag, ",".join(models) if is_list else models[0]]
    # the app's scripts run as a process of their own, which installs the stand-ins at start (child_environment)
    code = run_subprocess(script, argv) if script in SUBPROCESS else run_in_process(script, argv, monkeypatch)
    assert code in (None, 0), f"benchmarks.{script} {' '.join(argv)} returned {code}"
    written = [p for p in out_dir.rglob("*") if p.is_file()]
    assert written and all(p.stat().st_size > 0 for p in written), f"{script}: nothing written to {out_dir}"
    for path in written:
        if path.suffix == ".json":
            json.loads(path.read_text(encoding="utf-8"))
    return written


def _marked(script: str, fast: set[str], name: str | None = None):
    marks = [] if script in fast and script not in SLOW else [pytest.mark.slow]
    if (script, name) in BROKEN:
        crash = (AssertionError, AttributeError, ModelNotFoundError)  # AssertionError: the script's exit code
        marks.append(pytest.mark.xfail(strict=True, raises=crash, reason=BROKEN[script, name]))
    if name is None:
        return pytest.param(script, marks=marks, id=script)
    return pytest.param(script, name, marks=marks, id=f"{script}-{name}")


@pytest.mark.parametrize("script", [_marked(s, FAST_DEFAULT) for s in MODEL_FLAG])
def test_default_path(script, with_stand_ins, tmp_path, monkeypatch):
    run(script, [], tmp_path, monkeypatch)


@pytest.mark.parametrize("script", [_marked(s, FAST_EVERY_KIND) for s, (_, _, many) in MODEL_FLAG.items() if many])
def test_every_kind(script, with_stand_ins, tmp_path, monkeypatch):
    _, names, _ = MODEL_FLAG[script]
    written = run(script, list(names), tmp_path, monkeypatch)
    if script == "encode_speed":  # one result file per model, each measured
        results = {p.name: json.loads(p.read_text()) for p in written if p.suffix == ".json"}
        assert set(results) == {f"encode-speed-{n}.json" for n in names}
        assert all(r["throughput"] and r["accuracy"] for r in results.values())


@pytest.mark.parametrize(
    ("script", "name"), [_marked(s, set(), n) for s, (_, names, many) in MODEL_FLAG.items() if not many for n in names]
)
def test_each_kind(script, name, with_stand_ins, tmp_path, monkeypatch):
    if (script, name) in REFUSED:
        with pytest.raises(MlseError, match=REFUSED[script, name]):
            run(script, [name], tmp_path, monkeypatch)
    else:
        run(script, [name], tmp_path, monkeypatch)


def test_every_model_script_is_covered():
    """A script with a model flag is listed here (or said above why not); the names are the registry's."""
    from mlse.encoders.registry import registry
    from tests.project.test_benchmarks_quick import MODEL_ARGS

    assert set(REGISTERED) == set(registry())
    # student_soup needs fine-tuned members; muse_speed runs muse only; app_latency (the app), seed_grid_time (~240
    # CPU-s a run) and scale_score (a local Ray, whose workers are processes of Ray's) default to minilm-en, whose
    # stand-in is the tiny BERT tests/project/test_benchmarks_quick.py runs them on
    assert set(MODEL_ARGS) - set(MODEL_FLAG) <= {
        "student_soup",
        "muse_speed",
        "app_latency",
        "seed_grid_time",
        "scale_score",
    }
    assert set(EXTRA) <= set(MODEL_FLAG) and FAST_DEFAULT | FAST_EVERY_KIND <= set(MODEL_FLAG)
    assert {s for s, _ in {**REFUSED, **BROKEN}} <= set(MODEL_FLAG)
