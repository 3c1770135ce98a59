"""The headline table of the README: every offline model on cross-12, EN-EN and Tatoeba-14.

    python -m benchmarks.headline                          # the table from the result files the studies wrote
    python -m benchmarks.headline --measure all            # measure every model again (through the embedding cache)
    python -m benchmarks.headline --measure shipped/me5-small+s1+s2,shipped/muse+s1+s2

Models: the three backbones, the four shipped Stage-1 / Stage-1+2 heads and the shipped student (``python -m mlse
models`` lists them). Metrics: STS Multi MT **test** Spearman x 100 averaged over the 12 cross-lingual pairs (cross-12)
and on EN-EN; LASER Tatoeba accuracy (mean of both directions, cosine nearest neighbour, %) averaged over the 14
languages of Ham & Kim (Tatoeba-14).

Without ``--measure`` each cell is read from the file that recorded it, named in the JSON's ``sources``: a backbone's
from ``results/baseline/<model>/`` (``benchmarks/baseline.py``), a shipped artifact's STS from its manifest (recomputed
from the shipped files by ``python -m mlse reproduce assets``), the student's Tatoeba-14 from its study's result file,
and any cell measured earlier with ``--measure`` from ``results/headline/measured.json``. A cell no file holds is left
empty. ``--measure`` evaluates the named models (torch backend) and adds them to ``measured.json``; a head costs little
once its backbone's embeddings are cached, a model whose embeddings are not cached costs minutes to an hour on 2 cores.
Writes ``results/headline/headline.{json,md}`` atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from benchmarks.common import output_dir
from mlse.atomic import atomic_write_text
from mlse.data.pairs import CROSS_12, HAM_KIM_14

ROOT = Path(__file__).resolve().parents[1]
MODELS = {  # name -> what it is (the table's second column)
    "me5-small": "backbone (multilingual-e5-small)",
    "muse": "backbone (USE multilingual v3)",
    "minilm-en": "backbone, English only (all-MiniLM-L6-v2)",
    "shipped/me5-small+s1": "Stage-1 head on me5-small",
    "shipped/me5-small+s1+s2": "Stage-1 + Stage-2 heads on me5-small",
    "shipped/muse+s1": "Stage-1 head on muse",
    "shipped/muse+s1+s2": "Stage-1 + Stage-2 heads on muse",
    "shipped/me5-small-student": "me5-small fine-tuned: soup of an EMA + CoSENT and an InfoNCE + CoSENT student (LoRA)",
}
METRICS = ("cross-12", "en-en", "tatoeba-14")
OUT = ROOT / "results" / "headline"
SHIPPED_DIRS = {"heads": ROOT / "assets" / "models" / "heads", "students": ROOT / "assets" / "models" / "students"}


def _read(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def recorded(name: str) -> tuple[dict, dict]:
    """({metric: value}, {metric: source file}) of ``name`` from the files the studies wrote."""
    values, sources = {}, {}
    if not name.startswith("shipped/"):
        sts, tatoeba = (
            ROOT / "results" / "baseline" / name / "sts.json",
            ROOT / "results" / "baseline" / name / "tatoeba.json",
        )
        if sts.is_file():
            data = _read(sts)
            values["cross-12"], values["en-en"] = (
                data["averages"]["cross-12"]["spearman"],
                data["scores"]["en-en"]["spearman"],
            )
            sources["cross-12"] = sources["en-en"] = _rel(sts)
        if tatoeba.is_file():
            values["tatoeba-14"] = _read(tatoeba)["averages"]["all"]["acc_mean"]
            sources["tatoeba-14"] = _rel(tatoeba)
        return values, sources
    short = name.removeprefix("shipped/")
    for folder in SHIPPED_DIRS.values():
        manifest_path = folder / short / "manifest.json"
        if not manifest_path.is_file():
            continue
        manifest = _read(manifest_path)
        values["cross-12"], values["en-en"] = manifest["scores"]["cross-12"], manifest["scores"]["en-en"]
        sources["cross-12"] = sources["en-en"] = _rel(manifest_path)
        study = ROOT / "results" / "students" / f"{manifest.get('recipe', '')}.json"
        if "tatoeba-14" in manifest["scores"]:  # measured on the exported adapter itself
            values["tatoeba-14"] = manifest["scores"]["tatoeba-14"]
            sources["tatoeba-14"] = _rel(manifest_path)
        elif manifest.get("recipe") and study.is_file():  # the trained run the adapter was exported from
            values["tatoeba-14"] = _read(study)["tatoeba"]["averages"]["all"]["acc_mean"]
            sources["tatoeba-14"] = _rel(study) + " (the run before its fp16 export)"
    return values, sources


def measure(name: str) -> dict:
    """cross-12, EN-EN (Spearman x 100) and Tatoeba-14 (mean accuracy, %) of one model, evaluated now."""
    from mlse.evaluation.runners import run_sts, run_tatoeba
    from mlse.models import load_model

    model = load_model(name)
    sts = run_sts(model, pairs=["en-en", *CROSS_12], n_boot=0)
    tatoeba = run_tatoeba(model, langs=list(HAM_KIM_14), keep_errors=False)
    return {
        "identity": model.identity,
        "cross-12": sts.averages["cross-12"]["spearman"],
        "en-en": sts.scores["en-en"]["spearman"],
        "tatoeba-14": tatoeba.averages["all"]["acc_mean"],
        "created": time.strftime("%Y-%m-%d", time.gmtime()),
    }


def table(names: list[str]) -> dict:
    """{model: {"values": {metric: value}, "sources": {metric: where it came from}}}; measured values win."""
    measured_path = OUT / "measured.json"
    measured = _read(measured_path) if measured_path.is_file() else {}
    rows = {}
    for name in names:
        values, sources = recorded(name)
        if name in measured:
            for metric in METRICS:
                values[metric] = measured[name][metric]
                sources[metric] = f"{_rel(measured_path)} ({measured[name]['created']})"
        rows[name] = {"values": {m: round(values[m], 1) for m in METRICS if m in values}, "sources": sources}
    return rows


def markdown(rows: dict) -> str:
    lines = ["| model | what | cross-12 | EN-EN | Tatoeba-14 |", "|---|---|---:|---:|---:|"]
    for name, row in rows.items():
        cells = [f"{row['values'][m]:.1f}" if m in row["values"] else "–" for m in METRICS]
        lines.append(f"| `{name}` | {MODELS.get(name, '')} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.headline", description=__doc__.splitlines()[0])
    parser.add_argument("--measure", default="", help="comma-separated models to evaluate again, or 'all'")
    parser.add_argument("--out", default=None, help="folder for headline.{json,md} (default results/headline)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="measure nothing; build the table from the recorded files into a temporary folder",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.measure = ""
    out = output_dir(args.out, args.quick, OUT, "headline")
    names = list(MODELS)
    to_measure = names if args.measure.strip() == "all" else [n.strip() for n in args.measure.split(",") if n.strip()]
    unknown = [n for n in to_measure if n not in MODELS]
    if unknown:
        print(f"error: not a headline model: {', '.join(unknown)}; choose from {', '.join(MODELS)}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    for name in to_measure:
        started = time.perf_counter()
        measured_path = out / "measured.json"
        measured = _read(measured_path) if measured_path.is_file() else {}
        measured[name] = measure(name)
        atomic_write_text(measured_path, json.dumps(measured, indent=1) + "\n")  # after each model: a stop keeps it
        print(f"{name}: measured in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    rows = table(names)
    command = "python -m benchmarks.headline"
    report = {
        "command": command,
        "metrics": {
            "cross-12": "STS Multi MT test Spearman x 100, mean over " + ", ".join(CROSS_12),
            "en-en": "STS Multi MT test Spearman x 100, en-en",
            "tatoeba-14": "LASER Tatoeba accuracy %, mean of both directions (cosine), over " + ", ".join(HAM_KIM_14),
        },
        "models": rows,
    }
    atomic_write_text(out / "headline.json", json.dumps(report, indent=1) + "\n")
    text = markdown(rows)
    atomic_write_text(out / "headline.md", f"# Headline results\n\n`{command}`; sources in headline.json.\n\n{text}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
