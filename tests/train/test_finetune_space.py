"""Fine-tunes on a Space: the training bitext ships as a contamination-filtered sample under
assets/data/finetune-bitext, a public deployment whose data directory has no parallel/ folder starts every bitext
method from the Fine-tune tab on it, and a GPU run picks its mixed precision from the device's capabilities."""

# ruff: noqa: F811  (pytest fixtures imported from tests/conftest_data.py are re-bound as arguments)

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from mlse import public_mode
from mlse.data.bitext import load_filtered_bitext, seed_per_pair
from mlse.data.bitext_sample import (
    MANIFEST,
    build_sample,
    load_sample_pair,
    sample_dir,
    sample_pairs,
    training_bitext_source,
)
from mlse.data.contamination import evaluation_sentences, normalize_sentence
from mlse.data.layout import PARALLEL_DIR, STS_DIR, STS_LANGS, TATOEBA_DIR
from mlse.data.pairs import ENGLISH_PAIRS, SEED_PARALLEL_PAIRS
from mlse.dirs import runs_dir
from mlse.errors import DataError, MlseError
from mlse.train.config import FinetuneConfig
from mlse.train.device import Capabilities, choose_precision, needs_grad_scaler
from mlse.train.loop import TrainingLoop
from tests.conftest_data import data_dir  # noqa: F401  (fixture)

MB = 1_000_000
SHIPPED = sample_dir()


def sample_sentences(root: Path) -> list[str]:
    return [s for pair in sample_pairs(root) for side in _sides(load_sample_pair(pair, root)) for s in side]


def _sides(corpus):
    return corpus.src, corpus.tgt


# ------------------------------------------------------------------------------------------- a stand-in data dir
def write_lines(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


@pytest.fixture()
def stand_in(tmp_path) -> Path:
    """A data directory laid out like the real one: two Tatoeba-Challenge folders, one LASER language, STS test/dev.

    Contaminated on purpose: "Guten Morgen." is in LASER Tatoeba, "A man plays." in STS test, "Danke." in STS dev;
    one zho line is Cantonese (not the standard written language)."""
    root = tmp_path / "data"
    par = root / PARALLEL_DIR
    deu = [f"Satz Nummer {i}." for i in range(8)] + ["Guten Morgen.", "Danke."]
    eng = [f"Sentence number {i}." for i in range(8)] + ["Good day.", "A man plays."]
    for code, lines in (("deu", deu), ("eng", eng)):
        write_lines(par / "deu-eng" / f"tatoeba-test-v2021-08-07.{code}", lines)
        write_lines(par / "deu-eng" / f"tatoeba-test-v2021-08-07.{code}.labels", [code] * len(lines))
    write_lines(par / "eng-zho" / "tatoeba-test-v2021-08-07.eng", ["One.", "Two.", "Three."])
    write_lines(par / "eng-zho" / "tatoeba-test-v2021-08-07.eng.labels", ["eng"] * 3)
    write_lines(par / "eng-zho" / "tatoeba-test-v2021-08-07.zho", ["一。", "二。", "三。"])
    write_lines(par / "eng-zho" / "tatoeba-test-v2021-08-07.zho.labels", ["cmn_Hans", "yue_Hans", "cmn_Hant"])
    write_lines(root / TATOEBA_DIR / "tatoeba.deu-eng.deu", ["Guten  Morgen.", "Hallo."])
    write_lines(root / TATOEBA_DIR / "tatoeba.deu-eng.eng", ["Good morning.", "Hello."])
    for lang in STS_LANGS:
        write_lines(root / STS_DIR / f"stsb-{lang}-test.csv", ["A man plays.,A woman sings.,1.0"])
        write_lines(root / STS_DIR / f"stsb-{lang}-dev.csv", ["Danke.,Bitte.,2.0"])
    return root


def test_the_sample_is_filtered_reproducible_and_oriented_as_asked(stand_in, tmp_path):
    manifest = build_sample(stand_in, tmp_path / "sample", per_pair=5, command="test")
    counts = manifest["pairs"]
    assert counts["deu-eng"] == {
        **counts["deu-eng"],
        "available": 10,
        "contaminated_dropped": 2,
        "clean": 8,
        "shipped": 5,
    }
    assert counts["eng-zho"] == {**counts["eng-zho"], "available": 2, "contaminated_dropped": 0, "shipped": 2}
    banned = evaluation_sentences(stand_in)
    shipped = sample_sentences(tmp_path / "sample")
    assert len(shipped) == 2 * 7 and not {normalize_sentence(s) for s in shipped} & banned
    assert "二。" not in shipped  # Cantonese-labelled line left out
    again = build_sample(stand_in, tmp_path / "again", per_pair=5, command="test")
    assert again["pairs"] == manifest["pairs"]  # byte-identical files: the same sha256
    assert manifest["licence"] == "CC BY 2.0 FR" and "tatoeba.org" in manifest["attribution"]
    assert set(manifest["evaluation_files"]) >= {f"{TATOEBA_DIR}/tatoeba.deu-eng.deu", f"{STS_DIR}/stsb-de-test.csv"}
    de_en, en_de = (load_sample_pair(p, tmp_path / "sample") for p in ("de-en", "eng-deu"))
    assert de_en.src == en_de.tgt and de_en.src[0].startswith("Satz") and en_de.src[0].startswith("Sentence")
    with pytest.raises(DataError, match="not in the shipped training sample"):
        load_sample_pair("en-fr", tmp_path / "sample")


def test_training_reads_the_sample_only_where_the_data_directory_has_no_bitext(stand_in, tmp_path):
    build_sample(stand_in, tmp_path / "sample", per_pair=5, command="test")
    assert not training_bitext_source(stand_in, tmp_path / "sample").shipped
    shutil.rmtree(stand_in / PARALLEL_DIR)
    source = training_bitext_source(stand_in, tmp_path / "sample")
    assert source.shipped and "shipped sample" in source.describe()
    with pytest.raises(DataError, match="no training bitext"):
        training_bitext_source(stand_in, tmp_path / "nothing")


def test_the_shipped_sample_matches_its_manifest_and_the_size_limits():
    manifest = json.loads((SHIPPED / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["command"] == "python -m mlse data sample-bitext" and manifest["licence"] == "CC BY 2.0 FR"
    assert "CC BY 2.0 FR" in (SHIPPED / "README.md").read_text(encoding="utf-8")
    assert sorted(manifest["pairs"]) == sample_pairs(SHIPPED)
    for name, entry in manifest["pairs"].items():
        path = SHIPPED / entry["file"]
        lines = gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")[:-1]
        assert len(lines) == entry["shipped"] == min(entry["clean"], manifest["per_pair"]), name
        assert entry["clean"] == entry["available"] - entry["contaminated_dropped"]
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    sizes = [p.stat().st_size for p in SHIPPED.iterdir()]
    assert max(sizes) <= 3 * MB and sum(sizes) <= 4 * MB
    for pair in [*ENGLISH_PAIRS, *SEED_PARALLEL_PAIRS]:  # every pair the Fine-tune tab offers
        assert len(load_sample_pair(pair)) > 500


def test_no_sentence_of_the_shipped_sample_is_in_the_real_evaluation_sets(data_dir):
    banned = evaluation_sentences(data_dir)  # LASER Tatoeba (all languages), STS Multi MT test and dev
    shipped = sample_sentences(SHIPPED)
    assert len(shipped) > 60_000
    assert [s for s in shipped if normalize_sentence(s) in banned] == []


@pytest.mark.slow
def test_the_shipped_sample_is_what_the_command_builds_from_the_real_data(data_dir, tmp_path):
    manifest = build_sample(data_dir, tmp_path / "rebuilt", command="python -m mlse data sample-bitext")
    shipped = json.loads((SHIPPED / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["pairs"] == shipped["pairs"] and manifest["source_files"] == shipped["source_files"]


# ------------------------------------------------------------------------------------- the loader's fallback
@pytest.fixture()
def space_data(tmp_path, data_dir) -> Path:
    """What a Space's data directory holds after the start-up fetch: STS Multi MT and LASER Tatoeba, no parallel/."""
    root = tmp_path / "space-data"
    root.mkdir()
    for folder in (STS_DIR, TATOEBA_DIR):
        (root / folder).symlink_to(data_dir / folder, target_is_directory=True)
    return root


def test_the_bitext_loader_falls_back_to_the_sample_and_says_so(space_data, data_dir):
    bitext = load_filtered_bitext(["en-de", "zh-en"], max_pairs=300, sample_seed=seed_per_pair(0), data_dir=space_data)
    assert "shipped sample" in bitext.info["source"]
    assert bitext.info["pairs"]["en-de"] == {"available": 2000, "contaminated_dropped": 0, "used": 300}
    assert bitext.src_lang[:1] == ["en"] and bitext.src_lang[-1] == "zh" and len(bitext.src) == 600
    assert set(bitext.src[:300]) <= set(load_sample_pair("en-de").src)
    assert any(p.endswith("deu-eng.tsv.gz") for p in bitext.info["data"])
    full = load_filtered_bitext(["en-de"], max_pairs=10, sample_seed=seed_per_pair(0), data_dir=data_dir)
    assert "data directory" in full.info["source"] and full.info["pairs"]["en-de"]["available"] > 10_000


# --------------------------------------------------------------------- public mode: the Fine-tune tab, nothing copied
@pytest.fixture()
def space(space_data, tiny_bert, monkeypatch):
    """Public mode, MLSE_DATA without parallel/, and the tiny BERT offered as a model (a run folder)."""
    from mlse.serving.app_state import AppState

    monkeypatch.setenv(public_mode.PUBLIC_ENV, "1")
    monkeypatch.delenv(public_mode.SPACE_ENV, raising=False)
    monkeypatch.setenv("MLSE_DATA", str(space_data))
    shutil.copytree(tiny_bert, runs_dir() / "tiny-student")
    return AppState()


def start_on_the_space(state, method: str, name: str, **overrides) -> dict:
    """Start a run from the tab's handler (4 steps of 8 pairs, dev every 2 steps on 16 rows per dev pair), wait for
    it, return the job's result."""
    from mlse.ui import finetune_tab as ft

    form = dict(
        method=method,
        model="runs/tiny-student",
        teacher="runs/tiny-student",
        pairs=["en-de", "en-zh"],
        max_pairs=48,
        budget_minutes=5,
        name=name,
        batch_size=8,
        eval_every=2,
        max_steps=4,
        dev_max_pairs=16,
        lr=1e-3,
    )
    form.update(overrides)
    assert "shipped sample" in ft.method_settings(state, method)["note"]
    message = ft.start_run(state, **form)
    assert message.startswith(f"Started **{name}**") and "shipped sample" in message, message
    jobs = ft.runner(state)
    job = jobs.latest()
    assert jobs.wait(600)
    assert job.state == "finished", job.message
    return job.result


def check_fine_tune(result: dict, name: str) -> None:
    metrics = result["metrics"]
    assert metrics["steps"] == 4 and metrics["stop_reason"] == "max_steps"
    assert "shipped sample" in metrics["training_data"] and metrics["data"]["en-zh"]["used"] == 48
    assert metrics["precision"] == "fp32" or metrics["precision"] == "bf16"  # a CPU: no fp16, no loss scaling
    config = json.loads((runs_dir() / name / "finetune_config.json").read_text())
    assert "shipped sample" in config["training_data"] and config["grad_scaler"] is False
    assert any(p.endswith("eng-zho.tsv.gz") for p in config["data_files"])
    assert (runs_dir() / name / "model" / "modules.json").is_file()


def test_a_fine_tune_starts_in_public_mode_with_nothing_copied(space, monkeypatch):
    from mlse.train import jobs
    from mlse.ui import finetune_tab as ft

    # in this process (the app spawns a child, which costs a torch import; the slow tests below keep it)
    monkeypatch.setattr(ft, "training_job", lambda req, child_process: jobs.training_job(req))
    check_fine_tune(start_on_the_space(space, "hard", "space-hard"), "space-hard")


@pytest.mark.parametrize(("method", "loss", "weight"), [("sts", "cosent", 1e-3), ("ema", "angle", 0.01)])
def test_scored_pairs_train_from_the_tab_in_public_mode(space, monkeypatch, method, loss, weight):
    """The STS term, alone or beside EMA, from the tab on a Space: STS Multi MT train comes with the start-up fetch."""
    from mlse.train import jobs
    from mlse.ui import finetune_tab as ft

    monkeypatch.setattr(ft, "training_job", lambda req, child_process: jobs.training_job(req))
    name = f"space-{method}-{loss}"
    form = dict(
        model="runs/tiny-student",
        pairs=["en-de"],
        max_pairs=48,
        budget_minutes=5,
        name=name,
        batch_size=8,
        eval_every=2,
    )
    owner = ft.new_owner()  # on a public deployment only the run's owner sees its curves
    message = ft.start_run(
        space,
        method,
        **form,
        max_steps=4,
        dev_max_pairs=16,
        lr=1e-3,
        teacher=None,
        sts_loss=loss,
        sts_weight=weight,
        owner=owner,
    )
    assert message.startswith(f"Started **{name}**"), message
    job = ft.runner(space).latest()
    assert ft.runner(space).wait(600) and job.state == "finished", job.message
    assert job.result["metrics"]["steps"] == 4 and job.result["metrics"]["sts_rows"] > 1000
    config = json.loads((runs_dir() / name / "finetune_config.json").read_text())
    assert (config["method"], config["sts_loss"], config["sts_weight"]) == (method, loss, weight)
    _, _, loss_figure, _, _ = ft.poll(space, owner=owner)
    sts_curve = [t for t in loss_figure.data if t.name == "STS term (unweighted)"]
    assert sts_curve and all(y is not None and y > 0 for y in sts_curve[0].y[1:])  # every evaluation after a step


@pytest.mark.slow
@pytest.mark.parametrize("method", ["hard", "mse", "ema", "soft"])
def test_every_fine_tune_method_runs_on_the_sample_in_public_mode(space, method):
    check_fine_tune(start_on_the_space(space, method, f"space-{method}"), f"space-{method}")


@pytest.mark.slow
def test_stage1_trains_on_the_sample_in_public_mode(space):
    from mlse.heads.scorer import Scorer

    start_on_the_space(
        space, "stage1", "space-s1", pairs=["eng-deu", "spa-zho"], max_epochs=3, probe=False, teacher=None
    )
    scorer = Scorer.load(runs_dir() / "space-s1")
    assert scorer.metadata["training"]["stage1"]["n_pairs"] == 96
    assert any(p.endswith("spa-zho.tsv.gz") for p in scorer.metadata["data"])


# ----------------------------------------------------------------------------------------- device and precision
@pytest.mark.parametrize(
    ("requested", "caps", "expected"),
    [
        ("auto", Capabilities("cuda", True, "NVIDIA H200"), "bf16"),  # Ampere and newer: bf16, no scaler
        ("auto", Capabilities("cuda", False, "Tesla T4"), "fp16"),  # a T4 Space: fp16 with loss scaling
        ("auto", Capabilities("cpu", True), "bf16"),
        ("auto", Capabilities("cpu", False), "fp32"),
        ("auto", Capabilities("mps", False), "fp32"),
        ("fp32", Capabilities("cuda", True, "NVIDIA H200"), "fp32"),
        ("bf16", Capabilities("cpu", False), "bf16"),  # asked for explicitly: as asked
        ("fp16", Capabilities("cuda", True, "NVIDIA H200"), "fp16"),
    ],
)
def test_the_precision_follows_the_device(requested, caps, expected):
    assert choose_precision(requested, caps) == expected
    assert needs_grad_scaler(expected) == (expected == "fp16")


def test_fp16_off_a_gpu_is_refused_with_the_reason():
    with pytest.raises(MlseError, match="fp16 needs a CUDA GPU"):
        choose_precision("fp16", Capabilities("cpu", True))


class PullToTwo:
    sentences_per_pair = 1

    def __init__(self, model):
        self.model = model

    def batch_loss(self, idx: np.ndarray):
        return ((self.model.weight - 2.0) ** 2).sum()

    def after_step(self, step: int, total_steps: int) -> None:
        pass

    def record(self) -> dict:
        return {}

    def final_metrics(self) -> dict:
        return {}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_the_loop_scales_the_loss_only_under_fp16(tmp_path, precision):
    model = nn.Linear(1, 1, bias=False)
    with torch.no_grad():
        model.weight.fill_(0.0)
    cfg = FinetuneConfig(
        out=str(tmp_path),
        batch_size=2,
        lr=0.1,
        max_steps=3,
        eval_every_steps=100,
        warmup_fraction=0.0,
        weight_decay=0.0,
        eval_at_start=False,
    )
    loop = TrainingLoop(
        cfg,
        model,
        PullToTwo(model),
        6,
        None,
        evaluate=lambda s: {"a": 1.0},
        save=lambda: None,
        device="cpu",
        precision=precision,
    )
    assert loop.run() == "max_steps"
    assert 0.25 < float(model.weight.detach()) < 0.35  # three AdamW steps of 0.1 towards 2, scaled or not
    metrics = loop.metrics("max_steps")
    assert ("grad_scale" in metrics) == (precision == "fp16")
    if precision == "fp16":
        assert metrics["grad_scale"] == 65536.0  # no overflow: the initial scale (it grows after 2,000 steps)
