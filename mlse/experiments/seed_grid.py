"""The seed's experiment grid: baseline, S1, S1+prelayer, S1+S2, S1+S2+conv, S1+S2+each non-linearity.

``python -m mlse experiment seed-grid --backbone NAME`` trains every variant on the same data, evaluates Pearson and
Spearman on STS Multi MT test for the seed's 15 pairs, and reports Pearson *relative to the baseline*, split into the
pairs Stage 2 trains on and the held-out pairs (as in the seed's figures). Outputs, under ``--out``:
``seed-grid.json`` (everything), ``seed-grid.md`` (the table) and ``seed-grid.html`` (an interactive bar chart).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from mlse.atomic import atomic_write_text
from mlse.data.pairs import HELD_OUT_PAIRS, SEED_STS_PAIRS, STAGE2_PAIRS
from mlse.dirs import runs_dir
from mlse.evaluation.runners import run_sts
from mlse.models import load_model
from mlse.results import library_versions
from mlse.runs import safe_name
from mlse.training import train_stage1, train_stage2

log = logging.getLogger(__name__)

STAGE1_VARIANTS = {"s1": {"prelayer": False}, "s1+prelayer": {"prelayer": True}}
STAGE2_VARIANTS = {
    "s1+s2": {"conv": False, "nonlinearity": "identity"},
    "s1+s2+conv": {"conv": True, "nonlinearity": "identity"},
    "s1+s2+sigmoid": {"conv": False, "nonlinearity": "sigmoid"},
    "s1+s2+tanh": {"conv": False, "nonlinearity": "tanh"},
}
VARIANTS = ["baseline", *STAGE1_VARIANTS, *STAGE2_VARIANTS]
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
) -> dict:
    """Train and evaluate every variant; write the outputs under ``out``; return the results dict.

    ``probe=False`` skips the language-ID probe of the Stage-1 variants (FLORES, ~12k sentences). ``backend`` runs the
    backbone on torch, onnx or onnx-int8; a non-torch grid keeps its runs apart (``seed-grid-<backbone>-<backend>``).
    """
    say = progress or (lambda msg: log.info("%s", msg))
    # 50 Stage-1 epochs by default: measured on minilm-en, both faster and better than 100 (README).
    stage1_config = {"max_epochs": DEFAULT_S1_EPOCHS, **(stage1_config or {})}
    out = Path(out)
    tag = "" if backend == "torch" else f"-{backend}"
    runs = Path(runs) if runs else runs_dir() / f"seed-grid-{safe_name(backbone)}{tag}"
    started = time.perf_counter()
    timings: dict[str, float] = {}
    encoder = load_model(backbone, backend=backend)
    scorers: dict[str, object] = {}

    say("baseline: evaluating the backbone")
    scores = {"baseline": _evaluate(encoder, pairs, data_dir)}
    timings["baseline"] = time.perf_counter() - started
    for variant, cfg in STAGE1_VARIANTS.items():
        t0 = time.perf_counter()
        say(f"{variant}: training Stage 1")
        scorers[variant] = train_stage1(encoder, out=runs / variant, max_pairs=max_pairs, data_dir=data_dir, seed=seed,
                                        probe=probe, **cfg, **(stage1_config or {}))  # fmt: skip
        scores[variant] = _evaluate(scorers[variant], pairs, data_dir)
        timings[variant] = time.perf_counter() - t0
    for variant, cfg in STAGE2_VARIANTS.items():
        t0 = time.perf_counter()
        say(f"{variant}: training Stage 2")
        scorers[variant] = train_stage2(scorers["s1"], out=runs / variant, data_dir=data_dir, seed=seed, **cfg,
                                        **(stage2_config or {}))  # fmt: skip
        scores[variant] = _evaluate(scorers[variant], pairs, data_dir)
        timings[variant] = time.perf_counter() - t0

    results = {
        "experiment": "seed-grid",
        "backbone": backbone,
        "backbone_identity": encoder.identity,
        "backend": backend,
        "config": {"max_pairs": max_pairs, "seed": seed, "pairs": list(pairs), "stage1": stage1_config or {},
                   "stage2": stage2_config or {}},  # fmt: skip
        "versions": library_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "runs": {v: str(runs / v) for v in scorers},
        "scores": scores,
        "relative_pearson": relative_pearson(scores),
        "groups": group_means(scores),
        "metrics": {v: s.metadata.get("metrics", {}) for v, s in scorers.items()},
        "timings_s": {**timings, "total": time.perf_counter() - started},
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "seed-grid.json", json.dumps(results, indent=2, default=_json_default) + "\n")
    atomic_write_text(out / "seed-grid.md", markdown_table(results) + "\n")
    try:
        atomic_write_text(out / "seed-grid.html", figure(results).to_html(include_plotlyjs="cdn"))
    except ImportError:  # plotly is in requirements; a missing optional output must not lose the results
        log.warning("plotly not installed: no seed-grid.html")
    say(f"seed grid done in {results['timings_s']['total']:.0f} s; results in {out}")
    return results


def _json_default(obj):
    if isinstance(obj, (np.floating, np.integer)):
        return obj.item()
    return str(obj)


def _evaluate(encoder, pairs, data_dir) -> dict[str, dict[str, float]]:
    result = run_sts(encoder, pairs=pairs, data_dir=data_dir, n_boot=0)
    return {p: {"pearson": s["pearson"], "spearman": s["spearman"]} for p, s in result.scores.items()}


def relative_pearson(scores: dict[str, dict[str, dict]]) -> dict[str, dict[str, float]]:
    """Pearson of each variant minus the baseline's, per pair (the seed's figures)."""
    base = scores["baseline"]
    return {v: {p: s[p]["pearson"] - base[p]["pearson"] for p in s} for v, s in scores.items() if v != "baseline"}


def group_means(scores: dict[str, dict[str, dict]]) -> dict[str, dict[str, float]]:
    """Mean Pearson over the Stage-2 training pairs and over the held-out pairs, per variant."""
    out = {}
    for v, s in scores.items():
        row = {}
        for group, members in (("stage2-train", STAGE2_PAIRS), ("held-out", HELD_OUT_PAIRS)):
            present = [p for p in members if p in s]
            row[group] = float(np.mean([s[p]["pearson"] for p in present])) if present else float("nan")
        out[v] = row
    return out


def markdown_table(results: dict) -> str:
    """Baseline Pearson per pair, then each variant's difference to it; group means at the right."""
    scores, rel, groups = results["scores"], results["relative_pearson"], results["groups"]
    pairs = [p for p in STAGE2_PAIRS + HELD_OUT_PAIRS if p in scores["baseline"]]
    head = "| variant | " + " | ".join(pairs) + " | avg trained | avg held-out |"
    lines = [head, "|---|" + "---:|" * (len(pairs) + 2)]
    base = scores["baseline"]
    g = groups["baseline"]
    lines.append("| baseline (Pearson) | " + " | ".join(f"{base[p]['pearson']:.1f}" for p in pairs)
                 + f" | {g['stage2-train']:.1f} | {g['held-out']:.1f} |")  # fmt: skip
    for v, row in rel.items():
        g = groups[v]
        d_train = g["stage2-train"] - groups["baseline"]["stage2-train"]
        d_held = g["held-out"] - groups["baseline"]["held-out"]
        lines.append(f"| {v} (Δ) | " + " | ".join(f"{row[p]:+.1f}" for p in pairs)
                     + f" | {d_train:+.1f} | {d_held:+.1f} |")  # fmt: skip
    note = ("Columns " + ", ".join(STAGE2_PAIRS) + " are the pairs Stage 2 trains on; the rest are held out. "
            "Rows after the first: Pearson x 100 minus the baseline's.")  # fmt: skip
    return "\n".join(lines) + "\n\n" + note + probe_table(results)


def probe_table(results: dict) -> str:
    """Disentanglement: accuracy of a linear language-ID probe on each representation (FLORES, held-out sentences)."""
    metrics = results.get("metrics", {})
    rows = [(v, metrics[v]["language_probe"]) for v in STAGE1_VARIANTS if "language_probe" in metrics.get(v, {})]
    if not rows:
        return ""
    lines = ["", "", "| Stage 1 variant | probe on backbone | probe on meaning | probe on language | chance |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for v, p in rows:
        lines.append(f"| {v} | {p['backbone']:.1f} | {p['meaning']:.1f} | {p['language']:.1f} | {p['chance']:.1f} |")
    return "\n".join(lines)


def figure(results: dict):
    """Grouped bars of Pearson relative to the baseline, trained pairs and held-out pairs side by side."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it
    from plotly.subplots import make_subplots

    rel = results["relative_pearson"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("pairs Stage 2 trains on", "held-out pairs"),
                        column_widths=[0.4, 0.6], shared_yaxes=True)  # fmt: skip
    for i, (variant, row) in enumerate(rel.items()):
        for col, members in ((1, STAGE2_PAIRS), (2, HELD_OUT_PAIRS)):
            present = [p for p in members if p in row]
            bar = go.Bar(name=variant, x=present, y=[row[p] for p in present], legendgroup=variant,
                         showlegend=col == 1, marker_color=_COLOURS[i % len(_COLOURS)])  # fmt: skip
            fig.add_trace(bar, row=1, col=col)
    fig.update_layout(barmode="group", title=f"Pearson relative to {results['backbone']} (STS Multi MT test)",
                      yaxis_title="Δ Pearson × 100", height=450)  # fmt: skip
    return fig


_COLOURS = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#B279A2", "#FF9DA6"]
