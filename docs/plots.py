"""The docs' plots, drawn as small SVG files from result files and the shipped calibrations (no plotting library).

    python docs/plots.py [--out docs/figures]      # also run by python docs/make_figures.py

Each figure is a function of files in the repository, so regenerating it after a study is rerun keeps the docs true:

* ``calibration.svg``: the shipped cosine -> 0-5 maps (``assets/models/calibration/*.json``);
* ``students-dev.svg``: dev curves of seven recipes of the distillation study (``results/students/*.json``);
* ``students-swa-dev.svg``: the shipped soup's two recipes with and without weight averaging (the same files);
* ``finetune-compare-dev.svg``: dev curves of the four fine-tuning methods on ``minilm-en``
  (``results/finetune/finetune-compare-vocab30k-6min.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: mlse is imported from this checkout

from mlse.atomic import atomic_write_text  # noqa: E402

OUT = ROOT / "docs" / "figures"
COLOURS = ["#3b6fb6", "#d1603d", "#4c9a5f", "#8a5fb0", "#b08a2e", "#5f6b7a"]
WIDTH, HEIGHT = 640, 360
MARGIN = {"left": 56, "right": 190, "top": 34, "bottom": 46}  # the legend sits in the right margin

Series = tuple[str, list[tuple[float, float]]]


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """About ``count`` round tick values covering [lo, hi]."""
    span = hi - lo if hi > lo else 1.0
    raw = span / count
    step = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= step * factor:
            step *= factor
            break
    first = math.ceil(lo / step - 1e-9) * step
    return [round(first + i * step, 10) for i in range(int((hi - first) / step + 1e-9) + 1)]


def _label(value: float) -> str:
    return f"{value:g}"


def line_chart(
    series: list[Series],
    *,
    title: str,
    x_label: str,
    y_label: str,
    x_range: tuple[float, float] | None = None,
    y_range: tuple[float, float] | None = None,
    markers: bool = True,
) -> str:
    """One SVG document: a line per series, axes with round ticks, a legend on the right."""
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x0, x1 = x_range or (min(xs), max(xs))
    y0, y1 = y_range or (min(ys), max(ys))
    plot_w = WIDTH - MARGIN["left"] - MARGIN["right"]
    plot_h = HEIGHT - MARGIN["top"] - MARGIN["bottom"]

    def px(x: float) -> float:
        return MARGIN["left"] + (x - x0) / ((x1 - x0) or 1) * plot_w

    def py(y: float) -> float:
        return MARGIN["top"] + plot_h - (y - y0) / ((y1 - y0) or 1) * plot_h

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{MARGIN["left"]}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for tick in _ticks(x0, x1):
        parts.append(
            f'<line x1="{px(tick):.1f}" y1="{MARGIN["top"]}" x2="{px(tick):.1f}" '
            f'y2="{MARGIN["top"] + plot_h}" stroke="#e3e3e3"/>'
        )
        parts.append(
            f'<text x="{px(tick):.1f}" y="{MARGIN["top"] + plot_h + 16}" text-anchor="middle">{_label(tick)}</text>'
        )
    for tick in _ticks(y0, y1):
        parts.append(
            f'<line x1="{MARGIN["left"]}" y1="{py(tick):.1f}" x2="{MARGIN["left"] + plot_w}" '
            f'y2="{py(tick):.1f}" stroke="#e3e3e3"/>'
        )
        parts.append(f'<text x="{MARGIN["left"] - 6}" y="{py(tick) + 4:.1f}" text-anchor="end">{_label(tick)}</text>')
    parts.append(
        f'<rect x="{MARGIN["left"]}" y="{MARGIN["top"]}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#888"/>'
    )
    parts.append(
        f'<text x="{MARGIN["left"] + plot_w / 2:.1f}" y="{HEIGHT - 10}" text-anchor="middle">{escape(x_label)}</text>'
    )
    parts.append(
        f'<text transform="translate(16 {MARGIN["top"] + plot_h / 2:.1f}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    for i, (name, points) in enumerate(series):
        colour = COLOURS[i % len(COLOURS)]
        path = [f"{px(x):.1f},{py(y):.1f}" for x, y in points]
        parts.append(f'<polyline points="{" ".join(path)}" fill="none" stroke="{colour}" stroke-width="2"/>')
        if markers:
            parts += [f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}"/>' for x, y in points]
        ly = MARGIN["top"] + 10 + 20 * i
        lx = WIDTH - MARGIN["right"] + 14
        parts.append(f'<line x1="{lx}" y1="{ly}" x2="{lx + 18}" y2="{ly}" stroke="{colour}" stroke-width="3"/>')
        parts.append(f'<text x="{lx + 24}" y="{ly + 4}">{escape(name)}</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def calibration_figure() -> str:
    folder = ROOT / "assets" / "models" / "calibration"
    names = {
        "me5-small": "me5-small",
        "muse": "muse",
        "minilm-en": "minilm-en",
        "shipped_me5-small-student": "me5-small student",
    }
    series = []
    for stem, label in names.items():
        data = _read(folder / f"{stem}.json")
        xs, ys = data["x"], data["y"]
        series.append((label, [(-0.2, ys[0]), *zip(xs, ys), (1.0, ys[-1])]))  # flat beyond the knots, as applied
    return line_chart(
        series,
        title="Shipped calibrations: cosine -> 0-5",
        x_label="cosine of the two embeddings",
        y_label="calibrated score (0-5)",
        x_range=(-0.2, 1.0),
        y_range=(0, 5),
        markers=False,
    )


STUDENT_RECIPES = {
    "sts-cosent+lora": "CoSENT on scored pairs alone (LoRA)",
    "ema-frozen-cosent-w0.01+lora": "ema-frozen + 0.01 x CoSENT (LoRA)",
    "ema-frozen-cosent+lora": "ema-frozen + 0.001 x CoSENT (LoRA)",
    "ema-frozen": "ema-frozen",
    "hard-t0.01": "hard, T = 0.01",
    "mse-minilm-bridge": "mse-minilm-bridge",
    "hard": "hard, T = 0.1",
}


def _dev_curves(recipes: dict[str, str], x, title: str, x_label: str) -> str:
    """Dev Spearman of study runs (result file under results/students -> label) against ``x(point)`` of each curve
    point (None: left out)."""
    series = []
    for recipe, label in recipes.items():
        curve = _read(ROOT / "results" / "students" / f"{recipe}.json")["curve"]
        series.append((label, [(x(p), p["dev_spearman"]) for p in curve if x(p) is not None]))
    return line_chart(series, title=title, x_label=x_label, y_label="STS dev Spearman x 100")


def students_figure() -> str:
    return _dev_curves(
        STUDENT_RECIPES,
        lambda p: p["elapsed_s"] / 60,
        title="me5-small as the student: dev while training",
        x_label="training CPU-minutes",
    )


# the shipped soup's two recipes, retrained on one machine with and without weight averaging (result file -> label)
SWA_RECIPES = {
    "fast-vnni/ema-frozen-cosent-w0.01+lora@40": "ema-frozen + 0.01 x CoSENT, 40 min",
    "ema-frozen-cosent-w0.01-swa+lora@40": "the same, weights averaged from step 271",
    "fast-vnni/hard-t0.01-cosent+lora": "InfoNCE + CoSENT, 20 min",
    "hard-t0.01-cosent-swa+lora": "the same, weights averaged from step 111",
}


def swa_figure() -> str:
    return _dev_curves(
        SWA_RECIPES,
        lambda p: p["step"] or None,  # from the first evaluation after step 0, where every curve starts alike
        title="Weight averaging within a run: dev while training",
        x_label="training step",
    )


def finetune_compare_figure() -> str:
    curves = _read(ROOT / "results" / "finetune" / "finetune-compare-vocab30k-6min.json")["curves"]
    series = [(method, [(m, d) for m, d in points]) for method, points in curves.items()]
    return line_chart(
        series,
        title="minilm-en, four methods, 6 minutes each",
        x_label="training minutes",
        y_label="STS dev Spearman x 100",
    )


FIGURES = {
    "calibration.svg": calibration_figure,
    "students-dev.svg": students_figure,
    "finetune-compare-dev.svg": finetune_compare_figure,
    "students-swa-dev.svg": swa_figure,
}


def write_all(out: Path = OUT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in FIGURES.items():
        path = out / name
        atomic_write_text(path, make())
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    for path in write_all(args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
