"""The students' recipes of the distillation study: a linear bridge into the teacher's space, LoRA adapters, frozen
token embeddings and a CPU-time budget, on tiny local models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from mlse.dirs import runs_dir
from mlse.encoders.load import load_encoder
from mlse.encoders.lora_merge import build_merged
from mlse.errors import MlseError
from mlse.train.config_validation import validate
from mlse.train.finetune import finetune
from mlse.train.recipes.bridge import fit_linear_map, r2_score
from mlse.train.student_model import load_student
from tests.train.test_train_finetune import tiny_config


# ---------------------------------------------------------------------------------------------------------- bridge
def test_linear_map_recovers_a_known_map():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6))
    w_true, b_true = rng.normal(size=(6, 4)), np.array([0.5, -1.0, 2.0, 0.0])
    w, b = fit_linear_map(x, x @ w_true + b_true, ridge=1e-9)
    np.testing.assert_allclose(w, w_true, atol=1e-4)
    np.testing.assert_allclose(b, b_true, atol=1e-4)
    assert r2_score(x, x @ w_true + b_true, w, b) == pytest.approx(1.0, abs=1e-6)


def test_linear_map_equals_least_squares_on_noisy_data_and_ridge_shrinks():
    rng = np.random.default_rng(1)
    x, t = rng.normal(size=(50, 5)), rng.normal(size=(50, 3))
    w, b = fit_linear_map(x, t, ridge=0.0)
    design = np.hstack([x, np.ones((50, 1))])
    expected, *_ = np.linalg.lstsq(design, t, rcond=None)
    np.testing.assert_allclose(w, expected[:5], atol=1e-5)
    np.testing.assert_allclose(b, expected[5], atol=1e-5)
    w_ridge, _ = fit_linear_map(x, t, ridge=10.0)
    assert np.linalg.norm(w_ridge) < np.linalg.norm(w)


def test_linear_map_refuses_mismatched_rows():
    with pytest.raises(ValueError, match="same n"):
        fit_linear_map(np.zeros((4, 3)), np.zeros((5, 3)))


def test_bridged_mse_trains_a_student_into_a_teacher_of_another_dimension(tiny_bert, tiny_labse):
    # tiny_labse is 24-d, tiny_bert 32-d: plain MSE refuses that pair (test_train_finetune); the bridge maps 32 -> 24
    name = "tiny-bridge"
    metrics = finetune(tiny_config(name, tiny_labse, tiny_bert, method="mse", bridge="linear", bridge_sentences=16))
    config = json.loads((runs_dir() / name / "finetune_config.json").read_text())
    assert config["bridge"]["dims"] == [32, 24] and config["bridge"]["sentences"] == 16
    assert -1.0 <= config["bridge"]["r2"] <= 1.0 and metrics["steps"] == 4
    emb = load_encoder(f"runs/{name}", cache=False).encode(["Hello world.", "Hallo Welt."])
    assert emb.shape == (2, 24) and np.isfinite(emb).all()


def test_bridge_is_refused_without_a_frozen_teacher(tiny_bert):
    with pytest.raises(MlseError, match="only method 'mse'"):
        validate(tiny_config("x", None, tiny_bert, method="hard", bridge="linear"))


# ------------------------------------------------------------------------------------------------------------ LoRA
def test_lora_trains_only_the_adapter_and_the_saved_adapter_rebuilds_the_student(tiny_bert, tmp_path):
    name = "tiny-lora"
    metrics = finetune(tiny_config(name, None, tiny_bert, method="hard", lora_r=4, eval_at_start=False))
    run = runs_dir() / name
    config = json.loads((run / "finetune_config.json").read_text())
    assert 0 < config["trainable_parameters"] < config["parameters"] / 5
    assert (run / "adapter" / "adapter_model.safetensors").is_file() and metrics["steps"] == 4
    texts = ["Hello world.", "Hallo Welt.", "A man plays a flute."]
    trained = load_encoder(str(run / "model"), cache=False).encode(texts)
    base = load_encoder(str(tiny_bert), cache=False).encode(texts)
    assert np.abs(trained - base).max() > 1e-4  # the adapter changed the model
    rebuilt_dir = tmp_path / "rebuilt"
    build_merged(tiny_bert, run / "adapter", rebuilt_dir)
    rebuilt = load_encoder(str(rebuilt_dir), cache=False).encode(texts)
    np.testing.assert_allclose(rebuilt, trained, atol=1e-5)


def test_a_run_with_weight_averaging_saves_the_averaged_adapter(tiny_bert):
    from safetensors.numpy import load_file

    def adapter(name: str, **overrides) -> tuple[dict, dict]:
        settings = dict(method="hard", lora_r=4, eval_at_start=False, eval_every_steps=100)  # saved at the end only
        metrics = finetune(tiny_config(name, None, tiny_bert, **settings, **overrides))
        return load_file(runs_dir() / name / "adapter" / "adapter_model.safetensors"), metrics

    plain, plain_metrics = adapter("tiny-avg-off")
    last, last_metrics = adapter("tiny-avg-last", average_from=0.99)  # from step 4 of 4: the last weights alone
    half, half_metrics = adapter("tiny-avg-half", average_from=0.5)  # steps 2, 3 and 4
    assert "weight_average" not in plain_metrics
    assert last_metrics["weight_average"] == {"from_step": 4, "steps": 1}
    assert half_metrics["weight_average"] == {"from_step": 2, "steps": 3}
    assert plain.keys() == last.keys() == half.keys()
    assert all(np.array_equal(plain[k], last[k]) for k in plain)  # an average of one step is that step
    assert any(not np.allclose(plain[k], half[k]) for k in plain)  # the average of three is not the last
    load_encoder(str(runs_dir() / "tiny-avg-half" / "model"), cache=False).encode(["Hello world."])


def test_lora_with_a_bridge_ships_the_bridge_in_the_adapter(tiny_bert, tiny_labse, tmp_path):
    name = "tiny-lora-bridge"
    finetune(tiny_config(name, tiny_labse, tiny_bert, method="mse", bridge="linear", bridge_sentences=16, lora_r=2))
    run = runs_dir() / name
    assert json.loads((run / "adapter" / "extra_modules" / "modules.json").read_text())[0]["type"].endswith("Dense")
    build_merged(tiny_bert, run / "adapter", tmp_path / "rebuilt")
    texts = ["Hello world.", "Hallo Welt."]
    rebuilt = load_encoder(str(tmp_path / "rebuilt"), cache=False).encode(texts)
    trained = load_encoder(str(run / "model"), cache=False).encode(texts)
    assert rebuilt.shape == (2, 24)
    np.testing.assert_allclose(rebuilt, trained, atol=1e-5)


def _dense_weight(model_folder) -> np.ndarray:
    """The weight of the base's Dense after pooling (module 2 of the tiny LaBSE-like model)."""
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_folder), device="cpu", local_files_only=True)
    assert type(model[2]).__name__ == "Dense"
    return model[2].linear.weight.detach().numpy().copy()


def test_a_lora_student_with_its_own_dense_rebuilds_from_its_adapter(tiny_labse, tiny_bert, tmp_path):
    # tiny_labse: Transformer, Pooling, Dense (24-d, tanh), Normalize (as LaBSE); a bridge 24 -> 32 is appended
    name = "tiny-lora-dense"
    settings = dict(method="mse", bridge="linear", bridge_sentences=16, lora_r=2, lr=1e-2, eval_at_start=False)
    finetune(tiny_config(name, tiny_bert, tiny_labse, **settings))
    run = runs_dir() / name
    np.testing.assert_array_equal(_dense_weight(run / "model"), _dense_weight(tiny_labse))  # the base's Dense: frozen
    build_merged(tiny_labse, run / "adapter", tmp_path / "rebuilt")
    texts = ["Hello world.", "Hallo Welt.", "A man plays a flute."]
    rebuilt = load_encoder(str(tmp_path / "rebuilt"), cache=False).encode(texts)
    trained = load_encoder(str(run / "model"), cache=False).encode(texts)
    assert rebuilt.shape == (3, 32)
    assert np.allclose(rebuilt, trained, atol=1e-6), np.abs(rebuilt - trained).max()


def test_under_lora_the_appended_bridge_trains_and_the_bases_dense_does_not(tiny_labse):
    import torch

    from mlse.train.recipes.bridge import dense_layer
    from mlse.train.student_model import restrict_training, tokenize

    student = load_student(str(tiny_labse), "cpu", 32)
    base_modules = len(student)
    rng = np.random.default_rng(0)
    student.append(dense_layer(rng.normal(size=(24, 8)).astype(np.float32), np.zeros(8, np.float32)))
    info = restrict_training(tiny_config("x", None, tiny_labse, method="hard", lora_r=2), student, base_modules)
    base_dense, bridge = student[2], student[base_modules]
    assert not any(p.requires_grad for p in base_dense.parameters())
    assert all(p.requires_grad for p in bridge.parameters())
    lora = [n for n, p in student.named_parameters() if p.requires_grad and "lora_" in n]
    assert lora and info["trainable_parameters"] == sum(
        p.numel() for n, p in student.named_parameters() if "lora_" in n
    ) + sum(p.numel() for p in bridge.parameters())
    before = {k: v.detach().clone() for k, v in [("dense", base_dense.linear.weight), ("bridge", bridge.linear.weight)]}
    optimiser = torch.optim.SGD([p for p in student.parameters() if p.requires_grad], lr=0.1)
    for _ in range(2):
        out = student(tokenize(student, ["Hello world.", "Hallo Welt."], "cpu"))["sentence_embedding"]
        optimiser.zero_grad()
        (out**2).sum().backward()
        optimiser.step()
    assert torch.equal(base_dense.linear.weight, before["dense"])
    assert not torch.equal(bridge.linear.weight, before["bridge"])


def test_lora_and_vocabulary_extension_do_not_combine(tiny_bert):
    with pytest.raises(MlseError, match="extend_vocab"):
        validate(tiny_config("x", None, tiny_bert, method="hard", lora_r=4, extend_vocab=200))


# --------------------------------------------------------------------------------------------- frozen embeddings
def test_frozen_embeddings_stay_while_the_rest_trains(tiny_bert):
    name = "tiny-frozen-emb"
    finetune(tiny_config(name, None, tiny_bert, method="hard", freeze_embeddings=True, lr=1e-2, eval_at_start=False))
    before = load_student(str(tiny_bert), "cpu", 32)[0].auto_model
    after = load_student(str(runs_dir() / name / "model"), "cpu", 32)[0].auto_model
    emb_before = before.get_input_embeddings().weight.detach().numpy()
    emb_after = after.get_input_embeddings().weight.detach().numpy()
    np.testing.assert_array_equal(emb_before, emb_after)
    layer = "encoder.layer.0.attention.self.query.weight"
    w_before = dict(before.named_parameters())[layer].detach().numpy()
    w_after = dict(after.named_parameters())[layer].detach().numpy()
    assert np.abs(w_before - w_after).max() > 0


# --------------------------------------------------------------------------------------------------- budget clock
def test_cpu_budget_clock_is_recorded_and_stops_the_run(tiny_bert):
    name = "tiny-cpu-clock"
    metrics = finetune(
        tiny_config(
            name,
            None,
            tiny_bert,
            method="hard",
            budget_clock="cpu",
            budget_minutes=0.002,
            max_steps=None,
            eval_every_steps=1000,
            eval_at_start=False,
        )
    )
    assert metrics["budget_clock"] == "cpu" and metrics["stop_reason"] == "budget" and metrics["steps"] >= 1
    assert metrics["wall_s"] > 0 and metrics["elapsed_s"] >= 0.002 * 60


def test_unknown_budget_clock_is_refused(tiny_bert):
    with pytest.raises(MlseError, match="budget_clock"):
        validate(tiny_config("x", None, tiny_bert, method="hard", budget_clock="moon"))


# ------------------------------------------------------------------------------------------------- the study runner
def test_student_recipes_parse_with_lora_and_budget_suffixes():
    from mlse.experiments.distillation import LORA_LR, RECIPES, parse_recipe

    name, recipe = parse_recipe("ema-frozen+lora@60")
    assert name == "ema-frozen+lora@60" and recipe["lora_r"] == 8 and recipe["lr"] == LORA_LR
    assert recipe["budget_minutes"] == 60.0 and recipe["tau_base"] == 1.0
    assert parse_recipe("hard")[1] == RECIPES["hard"]
    for bad in ("nope", "hard+qlora", "hard@soon", "hard~sone"):
        with pytest.raises(MlseError, match="recipe"):
            parse_recipe(bad)
    name, recipe = parse_recipe("ema-frozen+lora@60~s2")  # another seed: another data sample, order and init
    assert recipe["seed"] == 2 and recipe["budget_minutes"] == 60.0 and recipe["lora_r"] == 8
    assert "seed" not in parse_recipe("ema-frozen+lora")[1]  # COMMON's seed 0
    # a recipe's own LoRA learning rate: used by +lora, dropped from the full fine-tune
    assert parse_recipe("ema-frozen-cosent-w0.01-lr2x+lora")[1]["lr"] == 2 * LORA_LR
    full = parse_recipe("ema-frozen-cosent-w0.01-lr2x")[1]
    assert "lora_lr" not in full and "lr" not in full and "lora_lr" in RECIPES["ema-frozen-cosent-w0.01-lr2x"]


def test_seeded_names_keep_seed_zero_plain_so_earlier_results_are_reused():
    from mlse.experiments.distillation import seeded, unseeded

    assert seeded("hard+lora", 0) == "hard+lora" and seeded("hard+lora", 2) == "hard+lora~s2"
    assert seeded("hard+lora~s2", 1) == "hard+lora~s1" and seeded("hard+lora~s2", 0) == "hard+lora"
    # what the seeds of one recipe share, a protocol's ":40-steps" kept
    assert unseeded("hard+lora~s12:40-steps") == "hard+lora:40-steps" and unseeded("two-stage~s1") == "two-stage"


def test_every_recipe_makes_a_valid_config_that_keeps_its_own_settings(tmp_path):
    from mlse.experiments.distillation import RECIPES, parse_recipe, recipe_config

    for name in [*RECIPES, *(f"{n}+lora" for n in RECIPES)]:
        recipe = parse_recipe(name)[1]  # what the study runs
        cfg = recipe_config(name, recipe, runs=tmp_path)
        validate(cfg)  # a recipe the study cannot run fails here, not an hour into `experiment students`
        assert all(getattr(cfg, k) == v for k, v in recipe.items()), name
        assert cfg.out == str(tmp_path / name)
    assert recipe_config("hard-t0.02", RECIPES["hard-t0.02"], runs=tmp_path).temperature == 0.02


def test_a_recipe_trains_evaluates_and_is_not_run_twice(tiny_bert, tmp_path):
    from mlse.experiments.distillation import run_recipe, write_report

    overrides = dict(
        student=str(tiny_bert),
        pairs=["en-de"],
        max_pairs=32,
        max_steps=2,
        batch_size=8,
        eval_every_steps=2,
        dev_pairs=["en-de"],
        dev_max_pairs=64,
        freeze_embeddings=False,
    )
    messages: list[str] = []
    result = run_recipe(
        "hard",
        {"method": "hard", "teacher": None},
        runs=tmp_path / "runs",
        out=tmp_path / "out",
        progress=messages.append,
        **overrides,
    )
    assert result["train"]["steps"] == 2 and len(result["sts"]["scores"]) == 17
    assert set(result["tatoeba"]["scores"]) and result["curve"][0]["step"] == 0
    again = run_recipe(
        "hard",
        {"method": "hard", "teacher": None},
        runs=tmp_path / "runs",
        out=tmp_path / "out",
        progress=messages.append,
        **overrides,
    )
    assert again == json.loads((tmp_path / "out" / "hard.json").read_text()) and "skipped" in messages[-1]
    # the run folder is recorded in a portable form, never as a bare relative path (which reads as a data path)
    assert again["run"].startswith(("repo:", "outside:", "cache:")), again["run"]
    table = write_report(tmp_path / "out")
    assert "| hard |" in table and (tmp_path / "out" / "students.html").is_file()
    assert f"| {result['train']['best_step']} / 2 |" in table  # the picked checkpoint is named beside the run
    first, last = result["curve"][0], result["curve"][-1]
    assert f"| hard | 0 → 2 | {first['dev_spearman']:.1f} → {last['dev_spearman']:.1f} |" in table  # dev shift


def test_students_report_only_trains_nothing(tmp_path, capsys):
    from mlse.cli.main import main
    from mlse.data.pairs import CROSS_12

    out = tmp_path / "out"
    out.mkdir()
    row = {
        "model": "hard",
        "sts": {"scores": {p: {"spearman": 70.0} for p in ["en-en", *CROSS_12]}},
        "tatoeba": {"averages": {"all": {"acc_mean": 90.0, "xsim_error": 6.0}}},
    }
    (out / "hard.json").write_text(json.dumps(row))
    (out / "gradient-norms.json").write_text(json.dumps({"ratio": 3700.0}))  # another analysis's file: not a row
    assert main(["experiment", "students", "--report-only", "--recipes", "mse-minilm-direct", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.json")) == ["gradient-norms.json", "hard.json"]  # nothing ran
    assert "| hard |" in (out / "students.md").read_text()


def _result_row(name: str, cross: float, tatoeba: float) -> dict:
    from mlse.data.pairs import CROSS_12

    return {
        "recipe": name,
        "sts": {"scores": {p: {"spearman": cross} for p in ["en-en", *CROSS_12]}},
        "tatoeba": {"averages": {"all": {"acc_mean": tatoeba, "xsim_error": 6.0}}},
        "train": {"steps": 10, "pairs_seen": 640, "best_step": 10, "elapsed_s": 60.0},
    }


def test_students_over_seeds_runs_each_seed_and_reports_mean_and_spread(tmp_path, monkeypatch):
    from mlse.cli import experiment
    from mlse.cli.main import main

    out = tmp_path / "out"
    out.mkdir()
    ran: list[tuple[str, int]] = []

    def fake_run(name, recipe, *, out, **kw):  # the training itself is tested above; here: which runs, which seeds
        ran.append((name, recipe.get("seed", 0)))
        cross = {0: 76.0, 1: 77.0, 2: 78.0}[recipe.get("seed", 0)]
        (out / f"{name}.json").write_text(json.dumps(_result_row(name, cross, 92.0)))

    monkeypatch.setattr(experiment, "run_recipe", fake_run)
    (out / "hard.json").write_text(json.dumps(_result_row("hard", 70.0, 90.0)))  # one seed: no spread row
    assert main(["experiment", "students", "--recipes", "sts-cosent+lora", "--seeds", "0,1,2", "--out", str(out)]) == 0
    assert ran == [("sts-cosent+lora", 0), ("sts-cosent+lora~s1", 1), ("sts-cosent+lora~s2", 2)]
    report = (out / "students.md").read_text()
    assert "| sts-cosent+lora | 3 | 77.0 ± 1.0 (76.0–78.0) | 77.0 ± 1.0 (76.0–78.0) | 92.0 ± 0.0" in report
    assert "| hard | 2 |" not in report and "| hard | 1 |" not in report
    ran.clear()  # a name with its own seed, no --seeds: that seed alone
    assert main(["experiment", "students", "--recipes", "sts-cosent+lora~s2", "--out", str(out)]) == 0
    assert ran == [("sts-cosent+lora~s2", 2)]


def test_students_with_max_steps_train_every_run_the_same_steps_under_a_steps_name(tmp_path, monkeypatch):
    from mlse.cli import experiment
    from mlse.cli.main import main

    out = tmp_path / "out"
    out.mkdir()
    ran: list[tuple[str, dict]] = []

    def fake_run(name, recipe, *, out, **kw):  # a CPU budget gives a slower CPU fewer steps: --max-steps does not
        ran.append((name, {k: v for k, v in kw.items() if k in ("max_steps", "budget_minutes")}))
        (out / f"{name}.json").write_text(json.dumps(_result_row(name, 76.0, 92.0)))

    monkeypatch.setattr(experiment, "run_recipe", fake_run)
    args = ["experiment", "students", "--recipes", "hard-t0.01-cosent-swa-xy+lora", "--out", str(out)]
    assert main([*args, "--max-steps", "374"]) == 0
    assert ran == [("hard-t0.01-cosent-swa-xy+lora:374-steps", {"max_steps": 374, "budget_minutes": 120.0})]
    ran.clear()
    assert main([*args, "--budget-minutes", "7"]) == 0
    assert ran == [("hard-t0.01-cosent-swa-xy+lora", {"budget_minutes": 7.0})]
    assert "hard-t0.01-cosent-swa-xy+lora:374-steps" in (out / "students.md").read_text()
