"""The one source of training defaults (mlse.train.config): the command line and the app read the same fields, make
configurations through the same functions and name runs by the same rule."""

from __future__ import annotations

import argparse
import ast
import inspect
import re
from dataclasses import fields

import pytest

from mlse.cli.args import config_options
from mlse.cli.main import build_parser
from mlse.data.pairs import DEV_PAIRS, ENGLISH_PAIRS, SEED_PARALLEL_PAIRS, STAGE2_PAIRS
from mlse.dirs import runs_dir
from mlse.errors import MlseError
from mlse.heads.choices import NONLINEARITIES
from mlse.losses.defaults import DEFAULT_TEMPERATURE
from mlse.public_mode import FINETUNE_LIMITS
from mlse.train.config import (
    MAX_PAIRS,
    FinetuneConfig,
    Stage1Settings,
    Stage2Settings,
    default_of,
    finetune_config,
    stage1_settings,
    stage2_settings,
)
from mlse.train.request import TrainRequest, request_config
from tests.paths import REPO_ROOT as ROOT

# every flag the command line had before its options were built from the dataclasses
FINETUNE_FLAGS = [
    "--method",
    "--teacher",
    "--student",
    "--pairs",
    "--max-pairs",
    "--budget-minutes",
    "--out",
    "--batch-size",
    "--lr",
    "--eval-every",
    "--max-steps",
    "--dev-pairs",
    "--dev-max-pairs",
    "--tau-base",
    "--label",
    "--temperature",
    "--tcm-alpha",
    "--no-src-term",
    "--extend-vocab",
    "--vocab-init",
    "--precision",
    "--no-bucket",
    "--freeze-embeddings",
    "--lora-r",
    "--lora-alpha",
    "--bridge",
    "--bridge-sentences",
    "--budget-clock",
    "--seed",
    "--data-dir",
    "--device",
    "--backend",
]
STAGE1_FLAGS = [
    "--backbone",
    "--prelayer",
    "--pairs",
    "--max-pairs",
    "--lr",
    "--max-epochs",
    "--no-probe",
    "--backend",
    "--out",
    "--seed",
    "--data-dir",
]
STAGE2_FLAGS = ["--stage1", "--conv", "--nonlinearity", "--max-epochs", "--backend", "--out", "--seed", "--data-dir"]


def _subparser(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in parser._actions for s in a.option_strings}


def _parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


@pytest.mark.parametrize(
    ("path", "flags"),
    [(("finetune",), FINETUNE_FLAGS), (("train", "stage1"), STAGE1_FLAGS), (("train", "stage2"), STAGE2_FLAGS)],
)
def test_every_flag_of_before_is_still_offered(path, flags):
    assert set(flags) <= _flags(_subparser(*path))


def test_the_command_line_takes_every_default_from_the_dataclass():
    """Nothing given but the method: the configuration is the dataclass's own, but for the teacher rule and run name."""
    config = finetune_config(**config_options(_parse("finetune", "--method", "mse"), FinetuneConfig))
    expected = FinetuneConfig(method="mse")
    for f in fields(FinetuneConfig):
        if f.name != "out":
            assert getattr(config, f.name) == getattr(expected, f.name), f.name
    assert config.out == str(runs_dir() / "minilm-en+mse")
    s1 = stage1_settings(**config_options(_parse("train", "stage1"), Stage1Settings))
    assert (s1.backbone, s1.pairs, s1.max_pairs, s1.probe, s1.lr) == (
        "minilm-en",
        SEED_PARALLEL_PAIRS,
        MAX_PAIRS,
        True,
        None,
    )
    assert s1.out == str(runs_dir() / "minilm-en+s1")


def test_no_default_is_written_in_the_parser():
    """Options left out stay out of the namespace (argparse.SUPPRESS): the dataclass alone decides, and the help text
    shows the dataclass's value."""
    args = vars(_parse("finetune", "--method", "ema"))
    assert not {f.name for f in fields(FinetuneConfig)} - {"method"} & set(args)
    help_text = " ".join(_subparser("finetune").format_help().split())
    assert f"(default: {default_of(FinetuneConfig, 'batch_size')})" in help_text
    assert f"(0: all) (default: {MAX_PAIRS})" in help_text
    source = (ROOT / "mlse" / "cli" / "main.py").read_text(encoding="utf-8")
    for flag in ("--eval-every", "--budget-minutes", "--tau-base", "--tcm-alpha", "--max-epochs", "--no-probe"):
        assert f'"{flag}"' not in source, f"{flag} is declared in cli.py instead of the dataclass"


def test_flags_reach_the_configuration():
    args = _parse(
        "finetune",
        "--method",
        "soft",
        "--teacher",
        "labse",
        "--student",
        "runs/x",
        "--pairs",
        "de-en,fr-en",
        "--max-pairs",
        "0",
        "--batch-size",
        "16",
        "--eval-every",
        "7",
        "--dev-max-pairs",
        "0",
        "--no-bucket",
        "--no-src-term",
        "--label",
        "average",
        "--lora-alpha",
        "8",
        "--no-eval-at-start",
    )
    config = finetune_config(**config_options(args, FinetuneConfig))
    assert (config.teacher, config.student, config.pairs) == ("labse", "runs/x", ["de-en", "fr-en"])
    assert config.max_pairs is None and config.dev_max_pairs is None  # 0: all
    assert (config.batch_size, config.eval_every_steps, config.label, config.lora_alpha) == (16, 7, "average", 8.0)
    assert config.bucket_by_length is False and config.include_src is False and config.eval_at_start is False
    assert config.out == str(runs_dir() / "x+soft")
    s2 = stage2_settings(
        **config_options(
            _parse("train", "stage2", "--stage1", "runs/m+s1", "--conv", "--nonlinearity", "tanh"), Stage2Settings
        )
    )
    assert s2.out == str(runs_dir() / "m+s1+s2+conv+tanh") and s2.pairs == STAGE2_PAIRS
    assert (
        tuple(next(a for a in _subparser("train", "stage2")._actions if a.dest == "nonlinearity").choices)
        == NONLINEARITIES
    )


def test_the_teacher_defaults_only_where_the_method_has_a_frozen_one():
    assert finetune_config(method="mse").teacher == "minilm-en" and finetune_config(method="soft").teacher
    assert finetune_config(method="hard").teacher is None and finetune_config(method="ema").teacher is None
    assert finetune_config(method="ema", teacher="x", student="x").teacher == "x"  # the student itself: allowed
    assert finetune_config(method="mse", teacher=None).teacher == "minilm-en"


def test_none_zero_and_empty_lists():
    config = finetune_config(
        method="hard",
        lr=None,
        batch_size=None,
        pairs=[],
        dev_pairs=None,
        max_steps=None,
        max_pairs=None,
        dev_max_pairs=0,
    )
    assert config.lr == default_of(FinetuneConfig, "lr")
    assert config.batch_size == default_of(FinetuneConfig, "batch_size")
    assert config.pairs == ENGLISH_PAIRS and config.dev_pairs == DEV_PAIRS  # empty: the default pairs
    assert config.max_pairs is None and config.dev_max_pairs is None and config.max_steps is None  # None: all / none
    with pytest.raises(TypeError, match="no option batch"):
        finetune_config(method="mse", batch=3)
    with pytest.raises(MlseError, match="Stage-1 scorer"):
        stage2_settings()


def test_the_app_request_defaults_are_the_configurations():
    req = TrainRequest.model_construct(method="mse", model="m", name="n")  # the form's initial values, unvalidated
    for name in (
        "budget_minutes",
        "batch_size",
        "eval_every_steps",
        "dev_max_pairs",
        "extend_vocab",
        "precision",
        "max_pairs",
    ):
        assert getattr(req, name) == default_of(FinetuneConfig, name), name
    assert req.max_pairs == default_of(Stage1Settings, "max_pairs") and req.probe == default_of(Stage1Settings, "probe")
    # the defaults a visitor's form starts from pass the public deployment's limits
    for _label, (attribute, limit) in FINETUNE_LIMITS.items():
        value = getattr(req, attribute)
        assert value is None or value <= limit, attribute


def test_the_app_and_the_command_line_make_the_same_configuration():
    out = runs_dir() / "same"
    req = TrainRequest(
        method="soft",
        model="runs/student",
        name="same",
        teacher="labse",
        pairs=["en-de"],
        max_pairs=None,
        batch_size=16,
        lr=0,
        eval_every_steps=5,
        dev_max_pairs=None,
        seed=3,
    )
    args = _parse(
        "finetune",
        "--method",
        "soft",
        "--student",
        "runs/student",
        "--teacher",
        "labse",
        "--pairs",
        "en-de",
        "--max-pairs",
        "0",
        "--batch-size",
        "16",
        "--eval-every",
        "5",
        "--dev-max-pairs",
        "0",
        "--seed",
        "3",
        "--out",
        str(out),
    )
    assert request_config(req, out) == finetune_config(**config_options(args, FinetuneConfig))
    # a hidden teacher field does not count for a method without a frozen teacher
    hard = TrainRequest(method="hard", model="m", name="h", teacher="stale", pairs=["en-de"])
    assert request_config(hard, out).teacher is None
    s1 = request_config(TrainRequest(method="stage1", model="minilm-en", name="s", max_epochs=0, backend="onnx"), out)
    args = _parse("train", "stage1", "--backend", "onnx", "--out", str(out))
    assert s1 == stage1_settings(**config_options(args, Stage1Settings)) and s1.backend == "onnx"
    s2 = request_config(TrainRequest(method="stage2", model="runs/x+s1", name="t", lr=1e-3, backend="onnx-int8"), out)
    assert isinstance(s2, Stage2Settings) and (s2.stage1, s2.lr, s2.backend) == ("runs/x+s1", 1e-3, "onnx-int8")


def test_train_stage1_and_stage2_keyword_defaults_come_from_the_settings():
    from mlse.train.head_training import train_stage1, train_stage2

    for fn, cls in ((train_stage1, Stage1Settings), (train_stage2, Stage2Settings)):
        params = inspect.signature(fn).parameters
        shared = [f.name for f in fields(cls) if f.name in params and params[f.name].default is not inspect._empty]
        assert {"seed", "backend"} <= set(shared)
        for name in shared:
            if name != "data_dir":
                assert (
                    list(params[name].default) == default_of(cls, name)
                    if name == "pairs"
                    else params[name].default == default_of(cls, name)
                ), (fn.__name__, name)


def test_train_heads_hands_every_setting_to_its_stage(monkeypatch):
    """train_heads passes each field under its own name, lr and max_epochs only when set (else the head's defaults)."""
    import mlse.train.head_training as heads

    seen = {}
    monkeypatch.setattr(heads, "train_stage1", lambda backbone, **kw: seen.update(stage1=dict(kw, backbone=backbone)))
    monkeypatch.setattr(heads, "train_stage2", lambda stage1, **kw: seen.update(stage2=dict(kw, stage1=stage1)))
    s1, s2 = Stage1Settings(out="o1", lr=0.01), Stage2Settings(stage1="runs/x+s1", out="o2", max_epochs=3)
    heads.train_heads(s1, progress=print)
    heads.train_heads(s2)
    fields1 = {f.name: getattr(s1, f.name) for f in fields(s1) if f.name != "max_epochs"}
    fields2 = {f.name: getattr(s2, f.name) for f in fields(s2) if f.name != "lr"}
    assert seen["stage1"] == fields1 | {"progress": print, "stop": None}
    assert seen["stage2"] == fields2 | {"progress": None, "stop": None}
    assert seen["stage1"]["lr"] == 0.01 and seen["stage2"]["max_epochs"] == 3


def test_cli_and_jobs_hold_no_literal_defaults_of_their_own():
    """The old duplicates (batch 64 vs 32, 5000 vs 2000 pairs) cannot come back unseen: the jobs hold none of those
    numbers and build no configuration of their own."""
    tree = ast.parse((ROOT / "mlse" / "train" / "jobs.py").read_text(encoding="utf-8"))
    literals = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and type(n.value) in (int, float)]
    assert not [v for v in literals if v in (2000, 5000, 32, 64)], literals
    assert not re.search(r"FinetuneConfig\(", (ROOT / "mlse" / "train" / "jobs.py").read_text(encoding="utf-8"))
    assert DEFAULT_TEMPERATURE == default_of(FinetuneConfig, "temperature")
