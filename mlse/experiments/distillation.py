"""The distillation study with ``me5-small`` as the student: every method at an equal CPU budget, then the test sets.

``python -m mlse experiment students [--recipes a,b] [--budget-minutes 20]`` trains each recipe into
``<runs>/students/<recipe>``, evaluates the best checkpoint on STS Multi MT test and Tatoeba-14 into
``<out>/<recipe>.json`` (an existing result or finished run is reused) and summarises them in ``students.md`` /
``.html``. Every recipe shares :data:`COMMON` (data, dev evaluation, frozen token embeddings, a CPU-time budget:
process CPU seconds / threads, so runs of the study are made alone). See docs/results/distillation.md.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_text
from mlse.data.pairs import (
    CROSS_12,
    ENGLISH_PAIRS,
    HAM_KIM_14,
    NON_ENGLISH_PAIRS,
    SEED_AND_CROSS_PAIRS,
    STUDY_DEV_PAIRS,
)
from mlse.data.portable import portable_record
from mlse.errors import MlseError
from mlse.evaluation.runners import run_sts, run_tatoeba
from mlse.models import load_model
from mlse.runs.folders import FINETUNE_CONFIG_FILE, LOG_FILE, read_json_dict, read_log_records
from mlse.train.config import FinetuneConfig
from mlse.train.finetune import finetune

log = logging.getLogger(__name__)

STUDENT = "me5-small"
TEST_PAIRS = SEED_AND_CROSS_PAIRS  # the seed's 15 + en-zh, de-fr
DEV_PAIRS = STUDY_DEV_PAIRS
COMMON = dict(
    student=STUDENT,
    pairs=list(ENGLISH_PAIRS),
    max_pairs=5000,
    batch_size=64,
    lr=5e-5,
    eval_every_steps=50,
    dev_pairs=DEV_PAIRS,
    dev_max_pairs=500,
    freeze_embeddings=True,
    budget_clock="cpu",
    budget_minutes=20.0,
    seed=0,
)
STS_WEIGHT = 1e-3  # the STS term beside a distillation loss (see the scored-pairs recipes below)
SWA_FROM = 0.25  # weight averaging from a quarter of the run on, once the dev curves plateau
LORA_LR = 5e-4  # LoRA's low-rank updates start at zero and need a larger step than full fine-tuning
EMA_FROZEN = dict(method="ema", teacher=None, tau_base=1.0)  # Ham & Kim's teacher, frozen: a copy of the start
# name -> what differs from COMMON (teacher None: the method needs none, or EMA's teacher is the student itself)
RECIPES: dict[str, dict] = {
    # Reimers & Gurevych: MSE to the English teacher; the two 384-d spaces start unrelated
    "mse-minilm-bridge": dict(method="mse", teacher="minilm-en", bridge="linear"),  # least-squares warm start
    "mse-minilm-direct": dict(method="mse", teacher="minilm-en"),  # no bridge: the student's space must rotate
    # Ham & Kim: EMA teacher from the student itself; tau_base ablation (1.0 = frozen copy of the start)
    "ema-0.999": dict(method="ema", teacher=None, tau_base=0.999),
    "ema-0.99999": dict(method="ema", teacher=None, tau_base=0.99999),
    "ema-frozen": dict(EMA_FROZEN),
    # the frozen copy with Reimers & Gurevych's second term, MSE(s(src), t(src)): keeps the English side in place
    "ema-frozen-src": dict(EMA_FROZEN, include_src=True),
    # Park et al.: soft labels from an English teacher (priority) or a multilingual one (average), +/- TCM
    "soft-minilm-priority": dict(method="soft", teacher="minilm-en", label="priority"),
    "soft-minilm-priority-tcm": dict(method="soft", teacher="minilm-en", label="priority", tcm_alpha=2.0),
    "soft-muse-average": dict(method="soft", teacher="muse", label="average"),
    "soft-muse-average-tcm": dict(method="soft", teacher="muse", label="average", tcm_alpha=2.0),
    "hard": dict(method="hard", teacher=None),  # in-batch InfoNCE, no teacher
    # temperatures near e5's pre-training one (0.01), where the untouched student already ranks translations high
    "hard-t0.02": dict(method="hard", teacher=None, temperature=0.02),
    "hard-t0.01": dict(method="hard", teacher=None, temperature=0.01),
    # Scored pairs: the STS term (mlse.train.sts_term) alone or beside a distillation loss, weighted STS_WEIGHT so that
    # its initial gradient is a few times the EMA loss's (python -m benchmarks.sts_term_balance)
    "sts-cosent": dict(method="sts", teacher=None, sts_loss="cosent"),
    "sts-angle": dict(method="sts", teacher=None, sts_loss="angle"),
    "ema-frozen-cosent": dict(EMA_FROZEN, sts_loss="cosent", sts_weight=STS_WEIGHT),
    "ema-frozen-angle": dict(EMA_FROZEN, sts_loss="angle", sts_weight=STS_WEIGHT),
    # the STS term ten times heavier: does the EMA term still hold retrieval?
    "ema-frozen-cosent-w0.01": dict(EMA_FROZEN, sts_loss="cosent", sts_weight=1e-2),
    # a doubled LoRA step (meant for +lora; the full fine-tune keeps COMMON's LR)
    "ema-frozen-cosent-w0.01-lr2x": dict(EMA_FROZEN, sts_loss="cosent", sts_weight=1e-2, lora_lr=2 * LORA_LR),
    # in-batch InfoNCE at e5's temperature beside CoSENT at weight 1 (a CoSENT batch pulls about as hard)
    "hard-t0.01-cosent": dict(method="hard", teacher=None, temperature=0.01, sts_loss="cosent", sts_weight=1.0),
    # a stronger teacher than the student itself: mUSE (512-d) through the least-squares bridge, plus the STS term
    "mse-muse-bridge-cosent": dict(
        method="mse", teacher="muse", bridge="linear", sts_loss="cosent", sts_weight=STS_WEIGHT
    ),
}
# For the leave-languages-out protocol (mlse.experiments.unrated) a method must learn from the rated pairs: the seeds'
# methods with the STS term beside them (weights as above; not tuned further)
RECIPES |= {
    # Reimers & Gurevych with their own English teacher
    "mse-minilm-bridge-cosent": {**RECIPES["mse-minilm-bridge"], "sts_loss": "cosent", "sts_weight": STS_WEIGHT},
    # Ham & Kim's moving teacher (tau_base 0.999), beside the shipped member's frozen one
    "ema-0.999-cosent-w0.01": dict(method="ema", teacher=None, tau_base=0.999, sts_loss="cosent", sts_weight=1e-2),
    # Park et al.: soft labels, English teacher (priority) or multilingual one (average), both with TCM
    "soft-minilm-priority-tcm-cosent": {**RECIPES["soft-minilm-priority-tcm"], "sts_loss": "cosent", "sts_weight": 1.0},
    "soft-muse-average-tcm-cosent": {**RECIPES["soft-muse-average-tcm"], "sts_loss": "cosent", "sts_weight": 1.0},
    # translate-train (mlse.train.recipes.translate_train): pseudo-rated pairs for bitext languages without rated pairs
    "sts-cosent-tt": dict(method="sts", teacher=None, sts_loss="cosent", translate_train=True),
    "ema-frozen-cosent-w0.01-tt": {**RECIPES["ema-frozen-cosent-w0.01"], "translate_train": True},
}
# the soup members' dev curves wander over a plateau: the same recipes with weights averaged (SWA) from SWA_FROM on
RECIPES |= {
    f"{name}-swa": {**RECIPES[name], "average_from": SWA_FROM}
    for name in ("ema-frozen-cosent-w0.01", "hard-t0.01-cosent")
}
# the retrieval member with the bitext's non-English pairs too: do X-Y translations lift X-Y similarity and retrieval?
RECIPES["hard-t0.01-cosent-swa-xy"] = {**RECIPES["hard-t0.01-cosent-swa"], "pairs": ENGLISH_PAIRS + NON_ENGLISH_PAIRS}


def parse_recipe(name: str) -> tuple[str, dict]:
    """``"NAME"``, ``"NAME+lora"`` (LoRA adapters), either with ``"@MINUTES"`` (another budget) and/or ``"~sSEED"``
    (another seed than COMMON's 0: another data sample, batch order and initialisation) -> (name, recipe)."""
    spec, seed = split_seed(name, "student recipe")
    base, _, minutes = spec.partition("@")
    base, _, variant = base.partition("+")
    if base not in RECIPES or variant not in ("", "lora"):
        raise MlseError(
            f"unknown student recipe {name!r}; expected one of {', '.join(RECIPES)}, optionally with "
            f"+lora, @MINUTES and/or ~sSEED"
        )
    recipe = {k: v for k, v in RECIPES[base].items() if k != "lora_lr"}  # lora_lr: for LoRA only
    if variant:  # LoRA adapters (rank 8, alpha 2 * rank) at LoRA's learning rate (the recipe's own where it names one)
        recipe |= {"lora_r": 8, "lr": RECIPES[base].get("lora_lr", LORA_LR)}
    if minutes:
        try:
            recipe["budget_minutes"] = float(minutes)
        except ValueError:
            raise MlseError(f"student recipe {name!r}: {minutes!r} is not a number of minutes") from None
    if seed is not None:
        recipe["seed"] = seed
    return name, recipe


def split_seed(name: str, what: str) -> tuple[str, int | None]:
    """``"NAME~sSEED"`` -> (NAME, SEED); (name, None) without ``~s``; a SEED that is not a whole number is an error
    naming the ``what``."""
    base, _, seed = name.partition("~s")
    if seed and not seed.isdigit():
        raise MlseError(f"{what} {name!r}: {seed!r} after ~s is not a seed (a whole number)")
    return base, int(seed) if seed else None


def unseeded(name: str) -> str:
    """The recipe ``name`` without its ``~sSEED``: what every seed of one recipe shares (``a~s1:40-steps``:
    ``a:40-steps``)."""
    base, _, rest = name.partition("~s")
    return base + rest.lstrip("0123456789")


def seeded(name: str, seed: int) -> str:
    """The recipe ``name`` at ``seed``: seed 0 (COMMON's) keeps the plain name, so its earlier results are reused."""
    return unseeded(name) if seed == 0 else f"{unseeded(name)}~s{seed}"


def recipe_config(name: str, recipe: dict, runs: Path, **overrides) -> FinetuneConfig:
    return FinetuneConfig(**{**COMMON, **recipe, **overrides, "out": str(runs / name)})


def evaluate_student(model: str, *, data_dir=None, pairs=TEST_PAIRS, langs=HAM_KIM_14, dev_pairs=()) -> dict:
    """STS test (17 pairs, Spearman/Pearson with CIs, group averages) and Tatoeba-14 of a model (fewer: a quick
    check); with ``dev_pairs``, also ``dev``: STS dev Spearman x 100 per pair and their mean."""
    encoder = load_model(model)
    sts = run_sts(encoder, pairs=pairs, data_dir=data_dir)
    tatoeba = run_tatoeba(encoder, langs=langs, data_dir=data_dir, keep_errors=False)
    extra = {}
    if dev_pairs:
        dev = run_sts(encoder, pairs=dev_pairs, split="dev", data_dir=data_dir, n_boot=0)
        spearman = {pair: round(float(s["spearman"]), 2) for pair, s in dev.scores.items()}
        extra["dev"] = {"spearman": spearman, "mean": round(sum(spearman.values()) / len(spearman), 2)}
    return {"model": model, "identity": encoder.identity, "sts": sts.to_dict(), "tatoeba": tatoeba.to_dict(), **extra}


def run_recipe(
    name: str,
    recipe: dict,
    *,
    runs: Path,
    out: Path,
    progress: Callable[[str], None] | None = None,
    data_dir=None,
    **overrides,
) -> dict:
    """Train (unless a finished run exists) and evaluate one recipe; write and return ``<out>/<name>.json``."""
    say = progress or (lambda msg: log.info("%s", msg))
    target = out / f"{name}.json"
    if target.is_file():
        say(f"{name}: result exists ({target}), skipped")
        return json.loads(target.read_text())
    config = recipe_config(name, recipe, runs, data_dir=data_dir, **overrides)
    run = Path(config.out)
    if not (run / "metrics.json").is_file() or config_changed(run, config):
        say(f"{name}: training {config.method} for {config.budget_minutes:g} CPU-minutes")
        finetune(
            config,
            progress=lambda r: say(
                f"{name}: step {r['step']} dev {r['dev_spearman']:.2f} ({r['elapsed_s'] / 60:.1f} min)"
            ),
        )
    say(f"{name}: evaluating on STS test and Tatoeba-14")
    t0 = time.perf_counter()
    result = {
        "recipe": name,
        "config": asdict(config),
        "train": json.loads((run / "metrics.json").read_text()),
        "curve": read_log_records(run / LOG_FILE),
        "run": str(run.resolve()),  # absolute, so the record names it portably (repo:runs/... under the checkout)
        **evaluate_student(str(run), data_dir=data_dir),
        "eval_s": round(time.perf_counter() - t0, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    record = portable_record(json.loads(json.dumps(result, default=str)), data_dir)  # no absolute path in the file
    atomic_write_text(target, json.dumps(record, indent=1) + "\n")
    return result


def config_changed(run: Path, config: FinetuneConfig) -> bool:
    """True when the run folder was trained with other settings than ``config`` (then it is trained again)."""
    saved = read_json_dict(run / FINETUNE_CONFIG_FILE)  # {} when missing or unreadable: trained again
    return not saved or any(
        _saved(saved.get(k)) != v for k, v in asdict(config).items() if k not in ("data_dir", "device")
    )


def _saved(value):
    """A setting as the config gave it: a run records its bridge as ``{"kind": ..., "r2": ...}``, asked as ``kind``."""
    return value["kind"] if isinstance(value, dict) and "kind" in value else value


# ----------------------------------------------------------------------------------------------------------- report
def summary_row(result: dict) -> dict:
    """The numbers the README table shows for one result file (student or baseline)."""
    sts, tat = result["sts"], result["tatoeba"]
    spearman = {p: s["spearman"] for p, s in sts["scores"].items()}
    row = {
        "model": result.get("recipe") or result["model"],
        "en-en": spearman.get("en-en"),
        "cross-12": float(np.mean([spearman[p] for p in CROSS_12])),
        "tatoeba-14": tat["averages"]["all"]["acc_mean"],
        "xsim": tat["averages"]["all"]["xsim_error"],
        "pairs": spearman,
    }
    if "train" in result:
        train = result["train"]
        row |= {
            "steps": train["steps"],
            "pairs_seen": train["pairs_seen"],
            "best_step": train["best_step"],
            "minutes": train["elapsed_s"] / 60,
            "wall_minutes": train.get("wall_s", train["elapsed_s"]) / 60,
        }
    return row


def markdown(rows: list[dict]) -> str:
    # "picked / run": the test scores are the dev-picked checkpoint's; picked 0 is the untouched student
    head = "| model | cross-12 | en-en | Tatoeba-14 acc | xSIM err | steps picked / run | pairs seen | "
    lines = [head + " | ".join(CROSS_12) + " |", "|---|" + "---:|" * (6 + len(CROSS_12))]
    for r in rows:
        steps = f"{r['best_step']} / {r['steps']}" if "steps" in r else "–"
        seen = f"{r['pairs_seen']:,}" if "pairs_seen" in r else "–"
        lines.append(
            f"| {r['model']} | **{r['cross-12']:.1f}** | {r['en-en']:.1f} | {r['tatoeba-14']:.1f} | "
            f"{r['xsim']:.1f} | {steps} | {seen} | " + " | ".join(f"{r['pairs'][p]:.1f}" for p in CROSS_12) + " |"
        )
    return "\n".join(lines)


def dev_shift_markdown(results: list[dict]) -> str:
    """Dev Spearman per dev pair at the first and the last evaluation of each run: what training did to each pair.

    It shows the trained model's effect when the dev pick is step 0 (the untouched student)."""
    runs = [r for r in results if len(r.get("curve", [])) >= 2 and r["curve"][0].get("dev")]
    if not runs:
        return ""
    pairs = list(runs[0]["curve"][0]["dev"])
    lines = ["| recipe | steps | mean | " + " | ".join(pairs) + " |", "|---|---:|" + "---:|" * (1 + len(pairs))]
    for r in sorted(runs, key=lambda r: r["recipe"]):
        first, last = r["curve"][0], r["curve"][-1]
        cells = [f"{first['dev'][p]:.1f} → {last['dev'][p]:.1f}" if p in last["dev"] else "–" for p in pairs]
        mean = f"{first['dev_spearman']:.1f} → {last['dev_spearman']:.1f}"
        lines.append(f"| {r['recipe']} | {first['step']} → {last['step']} | {mean} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def seeds_markdown(rows: list[dict]) -> str:
    """Mean ± standard deviation (and range) over the seeds of each recipe run with more than one seed."""
    groups: dict[str, list[dict]] = {}
    for r in rows:
        if "steps" in r:  # a trained student, not a baseline
            groups.setdefault(unseeded(r["model"]), []).append(r)
    lines = []
    for name, group in sorted(groups.items()):
        if len(group) >= 2:
            cells = " | ".join(_spread([r[key] for r in group]) for key in ("cross-12", "en-en", "tatoeba-14", "xsim"))
            lines.append(f"| {name} | {len(group)} | {cells} |")
    if not lines:
        return ""
    head = "| recipe | seeds | cross-12 | en-en | Tatoeba-14 acc | xSIM err |\n|---|---:|---:|---:|---:|---:|\n"
    return head + "\n".join(lines)


def _spread(values: list[float]) -> str:
    v = np.array(values, dtype=float)
    return f"{v.mean():.1f} ± {v.std(ddof=1):.1f} ({v.min():.1f}–{v.max():.1f})"


def curves_figure(results: list[dict]):
    """Dev Spearman (mean of the dev pairs) against training CPU-minutes, one line per recipe."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for r in results:
        points = [(c["elapsed_s"] / 60, c["dev_spearman"]) for c in r.get("curve", []) if c.get("dev_spearman")]
        if points:
            fig.add_trace(
                go.Scatter(x=[m for m, _ in points], y=[s for _, s in points], mode="lines+markers", name=r["recipe"])
            )
    fig.update_layout(
        title="STS Multi MT dev Spearman (en-en + 4 cross-lingual pairs) vs training CPU-minutes",
        xaxis_title="CPU-minutes (process CPU time / 2 threads)",
        yaxis_title="dev Spearman x 100",
    )
    return fig


def write_report(out: Path, baselines: dict[str, Path] | None = None) -> str:
    """``students.md`` and ``students.html`` from every result file in ``out`` (plus baseline result folders)."""
    # one file per recipe; a file of another analysis (no STS and Tatoeba results) is not a row
    results = [
        r for r in (json.loads(p.read_text()) for p in sorted(out.glob("*.json"))) if "sts" in r and "tatoeba" in r
    ]
    rows = []
    for name, folder in (baselines or {}).items():
        sts, tat = folder / "sts.json", folder / "tatoeba.json"
        if sts.is_file() and tat.is_file():
            rows.append(
                summary_row({"model": name, "sts": json.loads(sts.read_text()), "tatoeba": json.loads(tat.read_text())})
            )
    rows += sorted((summary_row(r) for r in results), key=lambda r: -r["cross-12"])
    table = markdown(rows)
    seeds = seeds_markdown(rows)
    if seeds:
        table += "\n\nOver seeds (mean ± sd across seeds, range in brackets; recipe~sN is seed N):\n\n" + seeds
    shift = dev_shift_markdown(results)
    if shift:
        table += "\n\nSTS Multi MT dev Spearman x 100, first -> last evaluation of each run:\n\n" + shift
    atomic_write_text(out / "students.md", table + "\n")
    try:
        atomic_write_text(out / "students.html", curves_figure(results).to_html(include_plotlyjs="cdn"))
    except ImportError:  # plotly is a requirement; without it the table is still written
        log.warning("plotly not installed: no students.html")
    return table
