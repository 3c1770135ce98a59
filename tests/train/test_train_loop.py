"""The method-free training loop (mlse.train.loop) driven by a made-up method on a one-weight model: evaluation
cadence, checkpoints, the warm-up, the reasons to stop, what a method adds to the records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mlse.stop_signal import StopSignal
from mlse.train.config import METHODS, FinetuneConfig
from mlse.train.loop import TrainingLoop, budget_clock, effective_clock, epoch_batches
from tests.paths import REPO_ROOT


class PullToTwo:
    """A method whose loss pulls the one weight towards 2; it counts its steps and reports them."""

    sentences_per_pair = 1

    def __init__(self, model: nn.Linear):
        self.model, self.steps, self.batches = model, [], []

    def batch_loss(self, idx: np.ndarray):
        self.batches.append(idx.tolist())
        return ((self.model.weight - 2.0) ** 2).sum() * len(idx)

    def after_step(self, step: int, total_steps: int) -> None:
        self.steps.append((step, total_steps))

    def record(self) -> dict:
        return {"method_steps": len(self.steps)}

    def final_metrics(self) -> dict:
        return {}


def _loop(tmp_path: Path, scores=None, device="cpu", **overrides):
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    settings = dict(
        out=str(tmp_path),
        batch_size=2,
        lr=0.1,
        eval_every_steps=2,
        max_steps=4,
        warmup_fraction=0.5,
        weight_decay=0.0,
        budget_minutes=5.0,
    )
    cfg = FinetuneConfig(**{**settings, **overrides})
    method = PullToTwo(model)
    saved, scores = [], list(scores or [10.0, 20.0, 15.0, 30.0, 5.0])
    tmp_path.mkdir(parents=True, exist_ok=True)

    def evaluate(stop):
        return {"a": scores.pop(0), "b": 0.0}

    loop = TrainingLoop(
        cfg, model, method, 6, None, evaluate=evaluate, save=lambda: saved.append(loop.step), device=device
    )
    return loop, method, saved


def test_evaluates_on_cadence_saves_on_improvement_and_logs(tmp_path):
    loop, method, saved = _loop(tmp_path)
    records: list[dict] = []
    loop.progress = records.append
    assert loop.run() == "max_steps" and loop.step == 4
    assert [r["step"] for r in records] == [0, 2, 4] and saved == [0, 2]  # the mean 5, 10, 7.5: improvements at 0, 2
    assert [r["dev_spearman"] for r in records] == [5.0, 10.0, 7.5] and loop.best_step == 2
    assert records[-1]["method_steps"] == 4 and records[-1]["epoch"] == round(4 * 2 / 6, 4)
    assert [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()] == records
    assert [s for s, _ in method.steps] == [0, 1, 2, 3] and all(k == 4 for _, k in method.steps)  # K = max_steps
    metrics = loop.metrics("max_steps")
    assert metrics["final_dev_step"] == 4 and metrics["best_dev_spearman"] == 10.0 and metrics["pairs_seen"] == 8
    assert loop.model.weight.item() > 0  # the optimiser stepped towards 2


def test_warm_up_is_linear_over_the_fraction_of_the_estimate(tmp_path):
    loop, _, _ = _loop(tmp_path, max_steps=8, warmup_fraction=0.25)  # K = 8: two warm-up steps
    assert [loop.lr_at(k) for k in range(4)] == pytest.approx([0.05, 0.1, 0.1, 0.1])


def test_batches_cover_an_epoch_before_repeating(tmp_path):
    loop, method, _ = _loop(tmp_path, max_steps=6, eval_at_start=False)
    loop.run()
    first, second = method.batches[:3], method.batches[3:]
    assert sorted(i for b in first for i in b) == list(range(6)) == sorted(i for b in second for i in b)


@pytest.mark.parametrize("how", ["event", "signal", "budget"])
def test_stop_reasons(tmp_path, how):
    overrides = {"max_steps": None}
    if how == "budget":
        overrides["budget_minutes"] = 1e-9
    loop, _, _ = _loop(tmp_path, scores=[1.0] * 100, **overrides)
    if how == "event":
        loop.signal = StopSignal()  # the Stop button, pressed at step 2
        loop.progress = lambda record: loop.signal.set() if record["step"] == 2 else None
    elif how == "signal":
        loop.signal = StopSignal(budget_s=0.0)
    reason = loop.run()
    assert reason == {"event": "stopped", "signal": "budget", "budget": "budget"}[how]
    assert loop.step == (2 if how == "event" else 0)


def test_the_dev_evaluation_is_handed_the_loops_own_signal(tmp_path):
    """One stop model: the evaluation asks the very signal the loop asks (not a callable copied from it)."""
    loop, _, _ = _loop(tmp_path, scores=[1.0] * 10)
    handed = []
    loop.evaluate_dev = lambda stop: handed.append(stop) or {"a": 1.0}
    loop.signal = StopSignal()  # set after construction: what the loop holds now is what evaluation gets
    loop.evaluate()
    assert handed == [loop.signal]


def test_a_cpu_budget_clock_counts_process_time():
    assert budget_clock("wall")() > 0
    cpu = budget_clock("cpu")
    before = cpu()
    sum(i * i for i in range(200_000))
    assert cpu() > before


@pytest.mark.parametrize(
    ("kind", "device", "expected"),
    [
        ("cpu", "cpu", "cpu"),
        ("cpu", "cuda", "wall"),
        ("cpu", "cuda:1", "wall"),
        ("cpu", "mps", "wall"),
        ("wall", "cpu", "wall"),
    ],
)
def test_a_cpu_time_budget_runs_on_the_wall_clock_off_the_cpu(kind, device, expected):
    # on a GPU the process's CPU seconds leave the device's time out: the budget would run many times over
    assert effective_clock(kind, device) == expected


def test_the_run_records_the_clock_it_counted_on(tmp_path):
    loop, _, _ = _loop(tmp_path / "cpu", budget_clock="cpu")
    loop.run()
    assert loop.metrics("max_steps")["budget_clock"] == "cpu"
    gpu, _, _ = _loop(tmp_path / "gpu", budget_clock="cpu", device="cuda")  # built, not run: no GPU here
    assert gpu.clock is budget_clock("wall") and gpu.metrics("max_steps")["budget_clock"] == "wall"


def test_epoch_batches_without_lengths_are_slices_of_a_permutation():
    batches = epoch_batches(7, 3, np.random.default_rng(0))
    assert [len(b) for b in batches] == [3, 3, 1] and sorted(np.concatenate(batches).tolist()) == list(range(7))


def test_the_loop_knows_no_method():
    source = (REPO_ROOT / "mlse" / "train" / "loop.py").read_text(encoding="utf-8")
    assert not re.search(r"cfg\.method\b", source) and "mlse.losses" not in source
    assert not [m for m in METHODS if re.search(rf"[\"']{m}[\"']", source)]


def test_weight_average_is_the_running_mean_and_swaps_back():
    from mlse.train.weight_average import WeightAverage

    model = nn.Linear(2, 1, bias=False)
    frozen = nn.Parameter(torch.ones(3), requires_grad=False)
    model.register_parameter("frozen", frozen)
    average = WeightAverage(model)
    assert len(average.params) == 1  # only what trains
    seen = []
    for value in ([1.0, 2.0], [3.0, -2.0], [8.0, 3.0]):
        with torch.no_grad():
            model.weight.copy_(torch.tensor([value]))
        average.update()
        seen.append(value)
    with average.swapped_in():
        assert torch.allclose(model.weight, torch.tensor(np.mean(seen, axis=0), dtype=torch.float32)[None])
    assert model.weight.tolist() == [[8.0, 3.0]] and average.count == 3  # the trained weights are back


def test_averaged_weights_are_what_is_scored_and_saved_from_the_start_fraction(tmp_path):
    model_weights = []
    loop, method, saved = _loop(tmp_path, scores=[1.0, 2.0, 3.0, 4.0], average_from=0.5, warmup_fraction=0.0)

    def evaluate(stop):  # score = the weight the loop hands to evaluation
        model_weights.append(float(loop.model.weight.detach()))
        return {"a": float(loop.model.weight.detach())}

    loop.evaluate_dev = evaluate
    trained = []
    loop.progress = lambda record: trained.append(record)
    steps = []
    real_update = loop.average.update
    loop.average.update = lambda: (steps.append(float(loop.model.weight.detach())), real_update())[1]
    loop.run()
    assert loop.average_from_step == 2 and steps and len(steps) == 3  # steps 2, 3, 4 of K = 4 (max_steps)
    assert model_weights[0] == 0.0 and model_weights[2] == pytest.approx(np.mean(steps))  # step 4: the average
    assert float(loop.model.weight.detach()) == pytest.approx(steps[-1])  # training goes on from its own weights
    assert trained[-1]["averaged_steps"] == 3 and "averaged_steps" in trained[0]
    assert loop.metrics("max_steps")["weight_average"] == {"from_step": 2, "steps": 3}


def test_once_averaging_begins_only_averages_compete_for_the_checkpoint(tmp_path):
    # dev means (half of each score): 4.5 at step 0 (plain weights), then 1.5 and 2.0 for averages at steps 2 and 4
    loop, _, saved = _loop(tmp_path, scores=[9.0, 3.0, 4.0, 1.0], average_from=0.5, warmup_fraction=0.0)
    records = []
    loop.progress = records.append
    loop.run()
    assert [r["averaged_steps"] > 0 for r in records] == [False, True, True]
    assert saved == [0, 2, 4] and loop.best_step == 4  # the pre-averaging peak held the pick before
    assert [r["saved"] for r in records] == [True, True, True]
    assert [r["best_dev_spearman"] for r in records] == [4.5, 1.5, 2.0]


def test_without_averaging_the_best_checkpoint_stands(tmp_path):
    loop, _, saved = _loop(tmp_path, scores=[9.0, 3.0, 4.0, 1.0])
    loop.run()
    assert saved == [0] and loop.best_step == 0


def test_without_averaging_nothing_is_averaged(tmp_path):
    loop, _, _ = _loop(tmp_path)
    records = []
    loop.progress = records.append
    loop.run()
    assert loop.average is None and "averaged_steps" not in records[-1]
    assert "weight_average" not in loop.metrics("max_steps")
