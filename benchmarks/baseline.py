"""Baseline tables for the README: the offline backbones side by side on STS, Tatoeba, mining and encode speed.

    python -m benchmarks.baseline                                  # me5-small, muse, minilm-en; torch
    python -m benchmarks.baseline --models me5-small --backend onnx-int8 --out results/baseline-int8
    python -m benchmarks.baseline --tatoeba-all                    # + Tatoeba over every LASER language (112)
    python -m benchmarks.baseline --quick [--models PATH]          # every table on a sliver of each task, seconds

Per model it writes ``<out>/<model>/{sts,tatoeba,mining-<pair>,throughput}.json`` (the mlse result schema, so the
app's Results tab lists them), ``<out>/tatoeba-all/<model>.json`` with ``--tatoeba-all``, and ``<out>/baseline.md``
with the side-by-side Markdown tables the README shows. STS: the seed's 15 pairs plus en-zh and de-fr (17), Spearman
with bootstrap CIs and group averages incl. cross-12; Tatoeba: Ham & Kim's 14 languages, both directions, ratio margin
and xSIM; mining: the BUCC-like task on de-en, ru-en, zh-en; throughput: cold (model forward) vs cache-served.
``--quick`` (default model ``minilm-en``) keeps the first STS pair, Tatoeba language and mining pair, times
:data:`QUICK_TEXTS` sentences and writes to a temporary folder unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_dir
from mlse.atomic import atomic_write_text
from mlse.data import HAM_KIM_14, load_sts, tatoeba_languages
from mlse.data.pairs import CROSS_12, SEED_STS_PAIRS
from mlse.evaluation.runners import run_mining, run_sts, run_tatoeba
from mlse.models import load_model
from mlse.runs.results import EvalResult

DEFAULT_MODELS = ["me5-small", "muse", "minilm-en"]
MINING_PAIRS = ["de-en", "ru-en", "zh-en"]
# The seed's 15 pairs plus the two of the 12 cross-lingual pairs (cross-12) that the seed lacks.
STS_PAIRS = SEED_STS_PAIRS + [p for p in CROSS_12 if p not in SEED_STS_PAIRS]
TATOEBA_COLUMNS = ["acc_to_en", "acc_from_en", "acc_mean_margin", "xsim_error"]
QUICK_TEXTS = 40  # sentences timed by --quick


def throughput(model: str, backend: str, limit: int | None = None) -> dict:
    """Sentences/s encoding the STS Multi MT en test sentences (the first ``limit``): cold (fresh cache) vs served
    from the cache."""
    texts = list(dict.fromkeys([*load_sts("en-en").s1, *load_sts("en-en").s2]))[:limit]
    previous = os.environ.get("MLSE_CACHE")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MLSE_CACHE"] = tmp
        try:
            enc = load_model(model, backend=backend)
            enc.encode(texts[:8])  # load the model and warm its kernels outside the timing
            t0 = time.perf_counter()
            enc.encode(texts[8:])  # none of these is cached yet: every one goes through the model
            cold = time.perf_counter() - t0
            t0 = time.perf_counter()
            load_model(model, backend=backend).encode(texts)  # a new process would do exactly this
            warm = time.perf_counter() - t0
        finally:
            os.environ.pop("MLSE_CACHE", None) if previous is None else os.environ.update(MLSE_CACHE=previous)
    n = len(texts)
    return {
        "model": model,
        "backend": backend,
        "sentences": n,
        "cold_per_s": (n - 8) / cold,
        "cold_s": cold,
        "cached_per_s": n / warm,
        "cached_s": warm,
        "cpu_count": os.cpu_count(),
        **machine(),
    }


def sts_table(results: dict[str, EvalResult]) -> str:
    models = list(results)
    lines = ["| pair | " + " | ".join(models) + " |", "|---|" + "---:|" * len(models)]
    first = next(iter(results.values()))
    for pair in first.scores:
        cells = []
        for m in models:
            s = results[m].scores[pair]
            lo, hi = s["spearman_ci95"]
            cells.append(f"{s['spearman']:.1f} [{lo:.1f}, {hi:.1f}]")
        lines.append(f"| {pair} | " + " | ".join(cells) + " |")
    for group in first.averages:
        lines.append(
            f"| *avg {group}* | "
            + " | ".join(f"**{results[m].averages[group]['spearman']:.1f}**" for m in models)
            + " |"
        )
    return "\n".join(lines)


def tatoeba_table(results: dict[str, EvalResult]) -> str:
    """One row per language, one cell group per model: to-en / from-en accuracy, margin accuracy, xSIM error."""
    models = list(results)
    head = "| lang | " + " | ".join(f"{m} →en / en→ / margin / xSIM" for m in models) + " |"
    lines = [head, "|---|" + "---|" * len(models)]
    first = next(iter(results.values()))
    rows = [(lang, {m: results[m].scores[lang] for m in models}) for lang in first.scores]
    rows.append(("*avg*", {m: results[m].averages["all"] for m in models}))
    for lang, per_model in rows:
        cells = [" / ".join(f"{per_model[m][c]:.1f}" for c in TATOEBA_COLUMNS) for m in models]
        lines.append(f"| {lang} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def mining_table(results: dict[str, list[EvalResult]], pairs: list[str] = MINING_PAIRS) -> str:
    models = list(results)
    lines = ["| pair | " + " | ".join(f"{m} P / R / F1" for m in models) + " |", "|---|" + "---|" * len(models)]
    for i, pair in enumerate(pairs):
        cells = []
        for m in models:
            s = results[m][i].scores[pair]
            cells.append(f"{s['precision']:.1f} / {s['recall']:.1f} / **{s['f1']:.1f}**")
        lines.append(f"| {pair} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def throughput_table(rows: list[dict]) -> str:
    lines = ["| model | backend | cold (model forward) | cache-served |", "|---|---|---:|---:|"]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['backend']} | {r['cold_per_s']:,.0f} sentences/s | "
            f"{r['cached_per_s']:,.0f} sentences/s |"
        )
    return "\n".join(lines)


def tatoeba_all_table(results: dict[str, EvalResult]) -> str:
    """Averages over every LASER language, and how many languages reach 90% / fall under 50% mean accuracy."""
    lines = [
        "| model | languages | mean acc (both directions) | margin | xSIM error | ≥ 90% | < 50% |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for m, r in results.items():
        avg = r.averages["all"]
        accs = [s["acc_mean"] for s in r.scores.values()]
        high, low = sum(a >= 90 for a in accs), sum(a < 50 for a in accs)
        lines.append(
            f"| {m} | {len(accs)} | {avg['acc_mean']:.1f} | {avg['acc_mean_margin']:.1f} | "
            f"{avg['xsim_error']:.1f} | {high} | {low} |"
        )
    return "\n".join(lines)


def model_folder(model: str) -> str:
    """The results subfolder of a model: its name, or the last part of a folder given by path."""
    return Path(model).name if Path(model).is_absolute() or model.startswith(".") else model


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.baseline", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--models",
        type=lambda s: s.split(","),
        default=None,
        help=f"default {','.join(DEFAULT_MODELS)} (--quick: minilm-en)",
    )
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--out", default=None, help="default results/baseline (--quick: a temporary folder)")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--tatoeba-all", action="store_true", help="also Tatoeba over every LASER language")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    args.models = args.models or (["minilm-en"] if args.quick else DEFAULT_MODELS)
    out = output_dir(args.out, args.quick, "results/baseline", "baseline")
    cut = 1 if args.quick else None  # --quick: the first STS pair, Tatoeba language and mining pair
    sts_pairs, tatoeba_langs, mining_pairs = STS_PAIRS[:cut], list(HAM_KIM_14)[:cut], MINING_PAIRS[:cut]
    started = time.perf_counter()
    sts, tatoeba, mining, speed, tatoeba_all = {}, {}, {}, [], {}
    for model in args.models:
        t0 = time.perf_counter()
        folder = out / model_folder(model)
        if not args.skip_throughput:
            speed.append(throughput(model, args.backend, QUICK_TEXTS if args.quick else None))
            atomic_write_text(folder / "throughput.json", json.dumps(speed[-1], indent=2) + "\n")
        enc = load_model(model, backend=args.backend)
        sts[model] = run_sts(enc, pairs=sts_pairs)
        sts[model].write_json(folder / "sts.json")
        tatoeba[model] = run_tatoeba(enc, langs=tatoeba_langs)
        tatoeba[model].write_json(folder / "tatoeba.json")
        mining[model] = [run_mining(enc, pair=p) for p in mining_pairs]
        for r in mining[model]:
            r.write_json(folder / f"mining-{next(iter(r.scores))}.json")
        if args.tatoeba_all:
            tatoeba_all[model] = run_tatoeba(
                enc, langs=tatoeba_languages()[: 2 if args.quick else None], keep_errors=False
            )
            tatoeba_all[model].write_json(out / "tatoeba-all" / f"{model_folder(model)}.json")
        print(f"{model}: {time.perf_counter() - t0:.0f} s", flush=True)
    sections = [
        f"# Baseline ({', '.join(args.models)}; backend {args.backend})",
        "## STS Multi MT test (Spearman × 100, 95% bootstrap CI)",
        sts_table(sts),
        "## Tatoeba, LASER test set (accuracy %, xSIM error %)",
        tatoeba_table(tatoeba),
        "## BUCC-like mining (threshold from train; P / R / F1 % on test)",
        mining_table(mining, mining_pairs),
    ]
    if speed:
        sections += ["## Encode throughput (STS en test sentences)", throughput_table(speed)]
    if tatoeba_all:
        sections += ["## Tatoeba over every LASER language", tatoeba_all_table(tatoeba_all)]
    text = "\n\n".join(sections) + f"\n\n(total {time.perf_counter() - started:.0f} s)\n"
    atomic_write_text(out / "baseline.md", text)
    print(text)


if __name__ == "__main__":
    main()
