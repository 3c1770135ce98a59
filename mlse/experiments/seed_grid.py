"""The seed's experiment grid: baseline, S1, S1+prelayer, S1+S2, S1+S2+conv, S1+S2+each non-linearity.

``python -m mlse experiment seed-grid --backbone NAME`` trains every variant on the same data and reports STS Multi MT
test Pearson *relative to the baseline* for the seed's 15 pairs, trained and held-out pairs apart, in
``seed-grid.json``, ``.md`` and ``.html`` under ``--out``. With ``--seeds 0,1,2`` the main variants train once per seed
(the extra seeds skip the costly FC prelayer unless ``all_variants``, and the language-ID probe); a change is called
only when the mean over seeds exceeds twice the seed standard deviation
(:func:`mlse.experiments.seed_grid_stats.verdict`). The first seed's scores carry 95 % bootstrap CIs per pair.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_text
from mlse.data.pairs import HELD_OUT_PAIRS, SEED_STS_PAIRS, STAGE2_PAIRS
from mlse.data.portable import portable_record
from mlse.data.stsb import load_sts
from mlse.dirs import runs_dir
from mlse.evaluation.runners import predict_sts
from mlse.evaluation.sts import bootstrap_pearson, percentile_ci95, sts_metrics
from mlse.experiments.seed_grid_stats import group_changes, group_means, relative_pearson, seed_summary
from mlse.models import load_model
from mlse.runs.folders import safe_name
from mlse.runs.results import library_versions
from mlse.train.head_training import train_stage1, train_stage2

log = logging.getLogger(__name__)

STAGE1_VARIANTS = {"s1": {"prelayer": False}, "s1+prelayer": {"prelayer": True}}
STAGE2_VARIANTS = {
    "s1+s2": {"conv": False, "nonlinearity": "identity"},
    "s1+s2+conv": {"conv": True, "nonlinearity": "identity"},
    "s1+s2+sigmoid": {"conv": False, "nonlinearity": "sigmoid"},
    "s1+s2+tanh": {"conv": False, "nonlinearity": "tanh"},
}
VARIANTS = ["baseline", *STAGE1_VARIANTS, *STAGE2_VARIANTS]
# What the extra seeds repeat: every Stage 2 variant sits on "s1", so only the prelayer is left out.
SEED_REPEATED_STAGE1 = ["s1"]
DEFAULT_S1_EPOCHS = 50


def run_seed_grid(
    backbone: str,
    *,
    out: str | Path,
    runs: str | Path | None = None,
    max_pairs: int | None = 2000,
    data_dir=None,
    seed: int = 0,
    pairs: list[str] = SEED_STS_PAIRS,
    stage1_config: dict | None = None,
    stage2_config: dict | None = None,
    probe: bool = True,
    progress: Callable[[str], None] | None = None,
    backend: str = "torch",
    seeds: Sequence[int] | None = None,
    all_variants: bool = False,
) -> dict:
    """Train and evaluate every variant; write the outputs under ``out``; return the results dict.

    ``seeds`` (default ``[seed]``): one run of every main variant per seed; ``scores`` are the first seed's (with CIs),
    ``seed_scores`` every seed's, ``seed_summary`` their means, deviations and verdicts. ``probe=False`` skips the
    language-ID probe. ``backend``: torch, onnx or onnx-int8 (a non-torch grid's runs go to its own folder)."""
    say = progress or (lambda msg: log.info("%s", msg))
    # 50 Stage-1 epochs by default: faster and better than 100 on minilm-en.
    stage1_config = {"max_epochs": DEFAULT_S1_EPOCHS, **(stage1_config or {})}
    out = Path(out)
    tag = "" if backend == "torch" else f"-{backend}"
    runs = Path(runs) if runs else runs_dir() / f"seed-grid-{safe_name(backbone)}{tag}"
    started = time.perf_counter()
    timings: dict[str, float] = {}
    encoder = load_model(backbone, backend=backend)
    seeds = list(seeds) if seeds else [seed]
    scorers: dict[str, object] = {}
    seed_scores: dict[str, dict[str, dict]] = {}

    say("baseline: evaluating the backbone")
    scores = {"baseline": _evaluate(encoder, pairs, data_dir, n_boot=1000)}
    timings["baseline"] = time.perf_counter() - started
    for i, s in enumerate(seeds):
        suffix = "" if i == 0 else f"-seed{s}"
        trained: dict[str, object] = {}
        repeated = [v for v in STAGE1_VARIANTS if i == 0 or all_variants or v in SEED_REPEATED_STAGE1]
        for variant in [*repeated, *STAGE2_VARIANTS]:
            t0 = time.perf_counter()
            run = runs / f"{variant}{suffix}"
            if variant in STAGE1_VARIANTS:
                stage, train, base = 1, train_stage1, encoder
                options = dict(max_pairs=max_pairs, probe=probe and i == 0, **STAGE1_VARIANTS[variant], **stage1_config)
            else:  # every Stage 2 variant on this seed's plain Stage 1
                stage, train, base = 2, train_stage2, trained["s1"]
                options = dict(**STAGE2_VARIANTS[variant], **(stage2_config or {}))
            say(f"{variant}{suffix}: training Stage {stage}")
            trained[variant] = train(base, out=run, data_dir=data_dir, seed=s, **options)
            n_boot = 1000 if i == 0 else 0
            seed_scores.setdefault(variant, {})[str(s)] = _evaluate(trained[variant], pairs, data_dir, n_boot=n_boot)
            timings[f"{variant}{suffix}"] = time.perf_counter() - t0
        if i == 0:
            scorers = trained
    scores |= {variant: by_seed[str(seeds[0])] for variant, by_seed in seed_scores.items()}

    results = {
        "experiment": "seed-grid",
        "backbone": backbone,
        "backbone_identity": encoder.identity,
        "backend": backend,
        "config": {
            "max_pairs": max_pairs,
            "seed": seeds[0],
            "seeds": seeds,
            "pairs": list(pairs),
            "stage1": stage1_config,
            "stage2": stage2_config or {},
        },
        "versions": library_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": {v: str(runs / v) for v in scorers},
        "scores": scores,
        "seed_scores": seed_scores,
        **summaries(scores, seed_scores),
        "metrics": {v: s.metadata.get("metrics", {}) for v, s in scorers.items()},
        "timings_s": {**timings, "total": time.perf_counter() - started},
    }
    write_reports(results, out)
    say(f"seed grid done in {results['timings_s']['total']:.0f} s; results in {out}")
    return results


def write_reports(results: dict, out: str | Path) -> None:
    """Write ``seed-grid.json``, ``.md`` and ``.html`` under ``out`` (each atomically)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    record = portable_record(results)  # run folders named portably, never by absolute path
    atomic_write_text(out / "seed-grid.json", json.dumps(record, indent=2, default=_json_default) + "\n")
    atomic_write_text(out / "seed-grid.md", markdown_table(results) + "\n")
    try:
        atomic_write_text(out / "seed-grid.html", figure(results).to_html(include_plotlyjs="cdn"))
    except ImportError:  # plotly is in requirements; a missing optional output must not lose the results
        log.warning("plotly not installed: no seed-grid.html")


def rewrite_reports(out: str | Path) -> dict:
    """Recompute the summaries of an existing ``seed-grid.json`` from its scores and rewrite the three reports.

    Nothing is retrained or re-encoded: the recorded per-pair scores are the only input."""
    path = Path(out) / "seed-grid.json"
    if not path.is_file():
        raise FileNotFoundError(f"no seed grid at {path}: run the grid first (without --report-only)")
    results = json.loads(path.read_text())
    results |= summaries(results["scores"], results.get("seed_scores") or {})
    write_reports(results, out)
    return results


def summaries(scores: dict[str, dict], seed_scores: dict[str, dict[str, dict]]) -> dict:
    """Everything the reports derive from the per-pair scores (first seed's ``scores``, every seed's
    ``seed_scores``)."""
    return {
        "relative_pearson": relative_pearson(scores),
        "groups": group_means(scores),
        "seed_summary": seed_summary(scores["baseline"], seed_scores),
        "stage2_contrasts": stage2_contrasts(seed_scores),
    }


def _json_default(obj):
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return str(obj)


def _evaluate(encoder, pairs, data_dir, n_boot: int = 0) -> dict[str, dict]:
    """Pearson and Spearman x 100 per pair; with ``n_boot`` also 95 % bootstrap CIs of both."""
    datasets = {p: load_sts(p, "test", data_dir) for p in pairs}
    preds = predict_sts(encoder, datasets)
    out = {}
    for p, ds in datasets.items():
        m = sts_metrics(preds[p], ds.scores, n_boot=n_boot)
        row = {"pearson": m["pearson"], "spearman": m["spearman"]}
        if n_boot:
            row |= {
                "spearman_ci95": m["spearman_ci95"],
                "pearson_ci95": percentile_ci95(bootstrap_pearson(preds[p], ds.scores, n_boot=n_boot)),
            }
        out[p] = row
    return out


def stage2_contrasts(seed_scores: dict[str, dict[str, dict]], reference: str = "s1+s2") -> dict[str, dict]:
    """Each other Stage-2 variant against plain S1+S2 *of the same seed* (same Stage-1 head, same data), summarised
    as :func:`~mlse.experiments.seed_grid_stats.seed_summary` does."""
    ref = seed_scores.get(reference) or {}
    return {
        variant: group_changes({s: sc for s, sc in by_seed.items() if s in ref}, ref.__getitem__)
        for variant, by_seed in seed_scores.items()
        if variant in STAGE2_VARIANTS and variant != reference
    }


def markdown_table(results: dict) -> str:
    """Baseline Pearson per pair, then each variant's difference to it; group means at the right."""
    scores, rel, groups = results["scores"], results["relative_pearson"], results["groups"]
    pairs = [p for p in STAGE2_PAIRS + HELD_OUT_PAIRS if p in scores["baseline"]]
    head = "| variant | " + " | ".join(pairs) + " | avg trained | avg held-out |"
    lines = [head, "|---|" + "---:|" * (len(pairs) + 2)]
    base = scores["baseline"]
    g = groups["baseline"]
    lines.append(
        "| baseline (Pearson) | "
        + " | ".join(f"{base[p]['pearson']:.1f}" for p in pairs)
        + f" | {g['stage2-train']:.1f} | {g['held-out']:.1f} |"
    )
    for v, row in rel.items():
        g = groups[v]
        d_train = g["stage2-train"] - groups["baseline"]["stage2-train"]
        d_held = g["held-out"] - groups["baseline"]["held-out"]
        lines.append(
            f"| {v} (Δ) | " + " | ".join(f"{row[p]:+.1f}" for p in pairs) + f" | {d_train:+.1f} | {d_held:+.1f} |"
        )
    note = (
        "Columns " + ", ".join(STAGE2_PAIRS) + " are the pairs Stage 2 trains on; the rest are held out. "
        "Rows after the first: Pearson x 100 minus the baseline's."
    )
    return "\n".join(lines) + "\n\n" + note + seed_table(results) + probe_table(results)


def seed_table(results: dict) -> str:
    """Mean change over seeds ± seed standard deviation, per group of pairs, with the verdict (only with 2+ seeds):
    every variant against the baseline, then the Stage-2 variants against plain S1+S2."""
    seeds = results.get("config", {}).get("seeds") or []
    summary = results.get("seed_summary") or {}
    if len(seeds) < 2 or not summary:
        return ""
    intro = (
        f"Mean change over {len(seeds)} seeds ({', '.join(map(str, seeds))}), ± the seeds' standard deviation; "
        "a change is called only when the mean exceeds twice the deviation."
    )
    out = ["", "", intro, "", "Against the baseline:", "", *_summary_rows(summary)]
    contrasts = results.get("stage2_contrasts") or {}
    if contrasts:
        out += ["", "Stage-2 variants against plain s1+s2 of the same seed:", "", *_summary_rows(contrasts)]
    return "\n".join(out)


def _summary_rows(summary: dict[str, dict]) -> list[str]:
    cols = [
        ("stage2-train", "pearson"),
        ("held-out", "pearson"),
        ("en-en", "pearson"),
        ("all", "pearson"),
        ("all", "spearman"),
    ]
    lines = [
        "| variant | trained pairs, Pearson | held-out pairs, Pearson | EN-EN, Pearson | all pairs, Pearson | "
        "all pairs, Spearman |",
        "|---|---|---|---|---|---|",
    ]
    for variant, row in summary.items():
        cells = []
        for group, metric in cols:
            s = row.get(f"{group}/{metric}")
            if s is None:
                cells.append("–")
            elif np.isfinite(s["sd"]):
                cells.append(f"{s['mean']:+.1f} ± {s['sd']:.1f} ({s['verdict']})")
            else:
                cells.append(f"{s['mean']:+.1f} ({s['verdict']})")
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return lines


def probe_table(results: dict) -> str:
    """Disentanglement: accuracy of a linear language-ID probe on each representation (FLORES, held-out sentences)."""
    metrics = results.get("metrics", {})
    rows = [(v, metrics[v]["language_probe"]) for v in STAGE1_VARIANTS if "language_probe" in metrics.get(v, {})]
    if not rows:
        return ""
    lines = [
        "| Stage 1 variant | probe on backbone | probe on meaning | probe on language | chance |",
        "|---|---:|---:|---:|---:|",
    ]
    for v, p in rows:
        lines.append(f"| {v} | {p['backbone']:.1f} | {p['meaning']:.1f} | {p['language']:.1f} | {p['chance']:.1f} |")
    return "\n\n" + "\n".join(lines)


def figure(results: dict):
    """Grouped bars of Pearson relative to the baseline, trained pairs and held-out pairs side by side."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it
    from plotly.subplots import make_subplots

    rel = results["relative_pearson"]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("pairs Stage 2 trains on", "held-out pairs"),
        column_widths=[0.4, 0.6],
        shared_yaxes=True,
    )
    for i, (variant, row) in enumerate(rel.items()):
        for col, members in ((1, STAGE2_PAIRS), (2, HELD_OUT_PAIRS)):
            present = [p for p in members if p in row]
            bar = go.Bar(
                name=variant,
                x=present,
                y=[row[p] for p in present],
                legendgroup=variant,
                showlegend=col == 1,
                marker_color=_COLOURS[i % len(_COLOURS)],
            )
            fig.add_trace(bar, row=1, col=col)
    fig.update_layout(
        barmode="group",
        title=f"Pearson relative to {results['backbone']} (STS Multi MT test)",
        yaxis_title="Δ Pearson × 100",
        height=450,
    )
    return fig


_COLOURS = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6"]
