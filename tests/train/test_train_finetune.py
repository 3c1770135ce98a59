"""Fine-tuning runs end to end on tiny local models: every method, stop-and-reload, EMA teacher, errors, CLI.

Runs are kept tiny (a few dozen en-de pairs, batch 8, a handful of steps, 64 dev rows) so the file takes seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from mlse.cli.main import main
from mlse.data import default_labels, load_parallel, normalize_sentence
from mlse.dirs import runs_dir
from mlse.encoders.load import load_encoder
from mlse.errors import MlseError
from mlse.runs.folders import FINETUNE_CONFIG_FILE as CONFIG_FILE
from mlse.stop_signal import StopSignal
from mlse.train.config import FinetuneConfig
from mlse.train.finetune import finetune
from mlse.train.finetune_data import prepare_data, teacher_targets
from mlse.train.methods import build_loss
from mlse.train.student_model import load_student, parameter_checksum, tokenize


def tiny_config(name: str, teacher: Path | None, student: Path, **overrides) -> FinetuneConfig:
    """A run of 4 steps of 8 en-de pairs, evaluated every 2 steps on 64 en-de dev rows, saved under $MLSE_RUNS."""
    settings = dict(
        teacher=str(teacher) if teacher else None,
        student=str(student),
        pairs=["en-de"],
        max_pairs=32,
        budget_minutes=2.0,
        max_steps=4,
        batch_size=8,
        lr=1e-3,
        eval_every_steps=2,
        dev_pairs=["en-de"],
        dev_max_pairs=64,
        out=str(runs_dir() / name),
    )
    settings.update(overrides)
    return FinetuneConfig(**settings)


def read_run(out: Path) -> tuple[dict, dict, list[dict]]:
    metrics = json.loads((out / "metrics.json").read_text())
    config = json.loads((out / CONFIG_FILE).read_text())
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return metrics, config, log


@pytest.mark.parametrize(
    ("method", "teacher", "extra"),
    [
        ("mse", "tiny_bert", {}),
        ("ema", None, {}),
        ("soft", "tiny_bert", {"label": "priority", "tcm_alpha": 1.0}),
        ("soft", "tiny_labse", {"label": "average"}),  # a 24-d teacher for a 32-d student: soft labels need no match
        ("hard", None, {}),
    ],
)
def test_each_method_writes_a_loadable_run(method, teacher, extra, request, tiny_bert):
    teacher_path = request.getfixturevalue(teacher) if teacher else None
    name = f"tiny-{method}-{teacher}"
    records: list[dict] = []
    metrics = finetune(tiny_config(name, teacher_path, tiny_bert, method=method, **extra), progress=records.append)

    out = runs_dir() / name
    saved, config, log = read_run(out)
    assert saved == metrics and metrics["steps"] == 4 and metrics["stop_reason"] == "max_steps"
    assert config["method"] == method and metrics["n_pairs"] == 32
    assert log == records and [r["step"] for r in records] == [0, 2, 4]  # step 0 = the untouched student
    assert {"step", "epoch", "loss", "elapsed_s", "dev_spearman", "best_dev_spearman"} <= set(records[-1])
    assert records[-1]["loss"] > 0 and metrics["best_dev_spearman"] == max(r["dev_spearman"] for r in records)
    assert metrics["sentences_per_s"] > 0 and metrics["dropped"]["en-de"] > 0
    for model in (str(out / "model"), f"runs/{name}"):  # the folder, and the run name the registry resolves
        emb = load_encoder(model, cache=False).encode(["Hello world.", "Hallo Welt."])
        assert emb.shape == (2, 32) and np.isfinite(emb).all()
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no temporary folders left


def test_budget_stops_the_run(tiny_bert):
    metrics = finetune(
        tiny_config(
            "tiny-budget",
            tiny_bert,
            tiny_bert,
            budget_minutes=0.02,
            max_steps=None,
            eval_every_steps=1000,
            eval_at_start=False,
        )
    )
    assert metrics["stop_reason"] == "budget" and metrics["steps"] >= 1
    assert metrics["final_dev_step"] == metrics["steps"]  # evaluated once more at the end
    assert (runs_dir() / "tiny-budget" / "model" / "modules.json").is_file()


@pytest.mark.parametrize("method", ["mse", "hard"])
def test_a_few_steps_lower_the_loss_on_a_fixed_batch(method, tiny_bert, tiny_xlmr):
    import torch

    torch.manual_seed(0)
    student = load_student(str(tiny_bert), "cpu", 64).eval()  # eval: no dropout, so the loss is a function
    cfg = FinetuneConfig(method=method, teacher=str(tiny_bert), student=str(tiny_bert))
    corpus = load_parallel("en-de", src_labels=default_labels("en"), tgt_labels=default_labels("de"), max_pairs=8)
    src, tgt = tokenize(student, corpus.src, "cpu"), tokenize(student, corpus.tgt, "cpu")
    with torch.no_grad():  # a fixed teacher target: the xlmr-like model's mean-pooled 32-d embeddings
        teacher = load_student(str(tiny_xlmr), "cpu", 64).eval()
        t_src = teacher(tokenize(teacher, corpus.src, "cpu"))["sentence_embedding"]  # [8, 32]
    loss_fn = build_loss(cfg, student)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
    losses = []
    for _ in range(10):
        loss = loss_fn(src, tgt, t_src)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0], losses


def test_stop_ends_the_run_and_leaves_a_loadable_model(tiny_bert):
    stop = StopSignal()
    records: list[dict] = []

    def progress(record: dict) -> None:
        records.append(record)
        stop.set()  # the app's stop button, pressed after the first evaluation

    cfg = tiny_config("tiny-stop", tiny_bert, tiny_bert, max_steps=50, eval_at_start=False)
    metrics = finetune(cfg, progress=progress, signal=stop)
    out = runs_dir() / "tiny-stop"
    assert metrics["stop_reason"] == "stopped" and metrics["steps"] == 2 and len(records) == 1
    assert metrics["best_step"] == 2
    assert load_encoder("runs/tiny-stop", cache=False).encode(["ok"]).shape == (1, 32)
    assert sorted(p.name for p in out.iterdir()) == [CONFIG_FILE, "log.jsonl", "metrics.json", "model"]


def test_keyboard_interrupt_writes_metrics_and_keeps_the_checkpoint(tiny_bert):
    def progress(record: dict) -> None:
        if record["step"] == 2:
            raise KeyboardInterrupt  # Ctrl-C during the second evaluation's report, after its checkpoint was saved

    with pytest.raises(KeyboardInterrupt):
        finetune(tiny_config("tiny-interrupt", tiny_bert, tiny_bert, max_steps=50), progress=progress)
    metrics, _, log = read_run(runs_dir() / "tiny-interrupt")
    assert metrics["stop_reason"] == "interrupted" and metrics["steps"] == 2 and len(log) == 2
    assert load_encoder("runs/tiny-interrupt", cache=False).encode(["ok"]).shape == (1, 32)


def test_ema_teacher_frozen_with_tau_one_and_moving_below(tiny_bert):
    initial = parameter_checksum(load_student(str(tiny_bert), "cpu", 128))
    frozen = finetune(tiny_config("tiny-ema-frozen", None, tiny_bert, method="ema", tau_base=1.0, eval_every_steps=4))
    assert frozen["teacher_checksum_start"] == initial == frozen["teacher_checksum_end"]
    moving = finetune(tiny_config("tiny-ema-moving", None, tiny_bert, method="ema", tau_base=0.5, eval_every_steps=4))
    assert moving["teacher_checksum_start"] == initial != moving["teacher_checksum_end"]
    assert 0.5 <= moving["tau_final"] <= 1.0


def test_frozen_teacher_embeddings_come_from_the_cache_the_second_time(tiny_bert):
    cfg = tiny_config("tiny-cache", tiny_bert, tiny_bert)
    data = prepare_data(cfg)
    first = teacher_targets(cfg, data, 32, "cpu")[2]["teacher_cache"]
    second = teacher_targets(cfg, data, 32, "cpu")[2]["teacher_cache"]
    assert first["encoded"] > 0 and second["encoded"] == 0


# --------------------------------------------------------------------------------------------------------- errors
def test_unknown_method_is_refused(tiny_bert):
    with pytest.raises(MlseError, match="method: 'distill' is not offered"):
        finetune(tiny_config("x", tiny_bert, tiny_bert, method="distill"))


def test_no_data_is_refused(tiny_bert):
    with pytest.raises(MlseError, match="no training pairs left"):
        finetune(tiny_config("x", tiny_bert, tiny_bert, max_pairs=0))


def test_everything_filtered_is_refused(tiny_bert, monkeypatch):
    """A pair whose every sentence is an evaluation sentence leaves no data, and says so."""
    corpus = load_parallel("en-de", src_labels=default_labels("en"), tgt_labels=default_labels("de"))
    everything = {normalize_sentence(s) for s in corpus.src}
    monkeypatch.setattr("mlse.data.bitext.evaluation_sentences", lambda data_dir=None: everything)
    with pytest.raises(MlseError, match="no training pairs left after the contamination filter"):
        finetune(tiny_config("x", tiny_bert, tiny_bert))


def test_mse_dimension_mismatch_is_refused(tiny_bert, tiny_labse):
    with pytest.raises(MlseError, match=r"equal teacher and student dimensions: .* 24-d, .* 32-d"):
        finetune(tiny_config("x", tiny_labse, tiny_bert, method="mse"))
    with pytest.raises(MlseError, match="EMA copy of the student"):
        finetune(tiny_config("x", tiny_labse, tiny_bert, method="ema"))


def test_cli_unknown_method_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["finetune", "--method", "distill", "--student", "minilm-en"])
    assert exc.value.code == 2
    assert "invalid choice: 'distill'" in capsys.readouterr().err


def test_cli_dimension_mismatch_is_one_error_line(tiny_bert, tiny_labse, capsys):
    code = main(
        [
            "-q",
            "finetune",
            "--method",
            "mse",
            "--teacher",
            str(tiny_labse),
            "--student",
            str(tiny_bert),
            "--pairs",
            "en-de",
            "--max-pairs",
            "16",
            "--out",
            str(runs_dir() / "x"),
        ]
    )
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]  # (transformers may draw a load bar)
    assert code == 2 and "Traceback" not in err and len(errors) == 1 and err.strip().endswith(errors[0])
    assert errors[0].startswith("error: method 'mse' needs equal teacher and student dimensions")


def test_cli_runs_and_prints_progress(tiny_bert, capsys):
    out = runs_dir() / "tiny-cli"
    code = main(
        [
            "-q",
            "finetune",
            "--method",
            "hard",
            "--student",
            str(tiny_bert),
            "--pairs",
            "de-en",
            "--max-pairs",
            "16",
            "--batch-size",
            "8",
            "--max-steps",
            "2",
            "--eval-every",
            "2",
            "--dev-pairs",
            "en-de",
            "--dev-max-pairs",
            "32",
            "--out",
            str(out),
        ]
    )
    lines = capsys.readouterr().out.splitlines()
    assert code == 0 and lines[0].startswith("step 0 |") and lines[1].startswith("step 2 |")
    assert json.loads((out / "metrics.json").read_text())["data"]["en-de"]["used"] == 16  # English made the src side
