"""The numbers the teaching guide (docs/teaching.md) quotes, measured on the shipped models.

    python -m benchmarks.teaching_numbers            # a few minutes on 2 cores; most embeddings come from the cache

Five exercises, one section each of ``results/teaching/teaching-numbers.{json,md}``:

1. **pairs**: the lesson's 70 pairs (``docs/teaching/lesson-pairs.tsv``: five English sentences, each against its
   translation, a paraphrase and an unrelated sentence in German, Russian, Chinese and Arabic, plus an English
   paraphrase and an unrelated English sentence) scored by every default backbone and the shipped student: the mean
   cosine and calibrated 0-5 score per kind of pair and language, and how often translation > paraphrase > unrelated.
2. **calibration**: for each model, the cosine its shipped cosine -> 0-5 map needs for a score of 1, 2.5 and 4
   (``assets/models/calibration``), next to the cosines of exercise 1.
3. **map**: the language-ID probe and translation retrieval@1 that the Language vs meaning map shows under each panel
   (FLORES-200 devtest, the map's eight default languages, 100 sentences each, seed 0) for the shipped Stage-1 heads,
   the student and the English-only reference.
4. **tatoeba**: on LASER Tatoeba, the errors of ``me5-small`` when the nearest English sentence is taken by cosine and
   by ratio margin, how many margin fixes and makes, and one error it fixes.
5. **finetune**: the first minutes of two dev curves, read from the result files of the studies that trained them.

The numbers depend on the models and data, not on the machine; no timing is reported. The report records the sha256
of every file in the repository they were computed from (``artifacts``: the shipped heads, student and calibrations,
the handout, the dev-curve result files; :func:`artifact_files`), and
``tests/project/test_benchmarks_teaching_numbers.py`` fails when one of them changed after the numbers were written:
rerun this script, then update docs/teaching.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from benchmarks.common import output_dir
from benchmarks.common.artifacts import artifact_hashes
from mlse.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
PAIRS_FILE = ROOT / "docs" / "teaching" / "lesson-pairs.tsv"
PAIR_MODELS = ["me5-small", "muse", "minilm-en", "shipped/me5-small-student"]
CALIBRATED_LEVELS = (1.0, 2.5, 4.0)
MAP_MODELS = ["shipped/me5-small+s1", "shipped/muse+s1", "shipped/me5-small-student", "minilm-en"]
MAP_SENTENCES = 100  # per language: the map tab's default
TATOEBA_MODEL = "me5-small"
TATOEBA_LANGS = ["deu", "jpn"]  # the Tatoeba tab's default language, and one in another script with more errors
KINDS = ("translation", "paraphrase", "unrelated")
CURVE_MINUTES = 3.0  # how much of each dev curve exercise 5 quotes
SHIPPED_ASSETS = ROOT / "assets" / "models"  # the repository's, whatever $MLSE_ASSETS says
SHIPPED_PREFIX = "shipped/"
CURVES = {  # name -> (result file, how to read its curve, what was trained)
    "me5-small, EMA objective with a frozen teacher, LoRA": (
        "results/students/ema-frozen+lora.json",
        "students",
        "python -m mlse experiment students --recipes ema-frozen+lora (20 CPU-minutes)",
    ),
    "minilm-en, MSE distillation, vocabulary extended by 30k pieces": (
        "results/finetune/finetune-compare-vocab30k-6min.json",
        "compare",
        "python -m benchmarks.finetune_compare --budget-minutes 6 --max-pairs 0 --extend-vocab 30000 "
        "--eval-every 60 --tag vocab30k-6min",
    ),
}


def artifact_files(pair_models: list[str] = PAIR_MODELS, map_models: list[str] = MAP_MODELS) -> list[Path]:
    """Every file in the repository the numbers are computed from: each shipped model's folder (``shipped/<name>``:
    heads, or a student's adapter, with its manifest), each scored model's shipped calibration and its manifest, the
    handout and the dev-curve result files. Backbones installed as packages are recorded by identity instead."""
    from mlse.calibration.backbone import MANIFEST_SUFFIX, SHIPPED_DIR, calibration_file  # lazy: calibration package
    from mlse.runs.shipped import list_shipped  # lazy: loads the run folders' package

    shipped = {item.name: item.folder for item in list_shipped(SHIPPED_ASSETS)}
    files = [PAIRS_FILE]
    for name in dict.fromkeys([*pair_models, *map_models]):
        if name.startswith(SHIPPED_PREFIX):
            files += sorted(p for p in shipped[name].rglob("*") if p.is_file())
    for name in pair_models:
        path = calibration_file(name, SHIPPED_DIR)
        files += [path, path.with_name(path.name.removesuffix(".json") + MANIFEST_SUFFIX)]
    return files + [ROOT / path for path, _, _ in CURVES.values()]


def score_lesson_pairs(models: dict) -> dict:
    """Exercise 1: every lesson pair under every model, and the means per (kind, language)."""
    from mlse.data.user_files import read_pairs

    table = read_pairs(PAIRS_FILE)
    s1, s2 = table.column("sentence1"), table.column("sentence2")
    kinds, langs = table.column("kind"), table.column("lang2")
    out = {"file": str(PAIRS_FILE.relative_to(ROOT)), "n": len(s1), "models": {}}
    for name, model in models.items():
        cos, cal = model.similarity(s1, s2)
        groups = {}
        for kind in KINDS:
            for lang in dict.fromkeys(langs):
                rows = [i for i in range(len(s1)) if kinds[i] == kind and langs[i] == lang]
                if rows:
                    groups[f"{kind} en-{lang}"] = _means(cos, cal, rows)
            groups[f"{kind} all"] = _means(cos, cal, [i for i in range(len(s1)) if kinds[i] == kind])
        calibrated = cal if cal is not None else [None] * len(cos)
        rows = [
            {"cosine": round(float(c), 4), "calibrated": None if v is None else round(float(v), 3)}
            for c, v in zip(cos, calibrated)
        ]
        out["models"][name] = {"groups": groups, "order_holds": _order_holds(cos, kinds, langs, s1), "rows": rows}
    return out


def _means(cos: np.ndarray, cal: np.ndarray | None, rows: list[int]) -> dict:
    return {
        "n": len(rows),
        "cosine": round(float(np.mean(cos[rows])), 3),
        "calibrated": None if cal is None else round(float(np.mean(cal[rows])), 2),
    }


def _order_holds(cos: np.ndarray, kinds: list[str], langs: list[str], s1: list[str]) -> dict:
    """For each (English sentence, other language): is cos(translation) > cos(paraphrase) > cos(unrelated)?"""
    by_key: dict[tuple[str, str], dict[str, float]] = {}
    for i, (kind, lang, anchor) in enumerate(zip(kinds, langs, s1)):
        by_key.setdefault((anchor, lang), {})[kind] = float(cos[i])
    cross = {k: v for k, v in by_key.items() if k[1] != "en"}
    full = sum(v["translation"] > v["paraphrase"] > v["unrelated"] for v in cross.values())
    meaning_first = sum(min(v["translation"], v["paraphrase"]) > v["unrelated"] for v in cross.values())
    return {
        "cases": len(cross),
        "translation>paraphrase>unrelated": int(full),
        "both related above unrelated": int(meaning_first),
    }


def calibration_levels(models: dict) -> dict:
    """Exercise 2: the cosine each model's shipped map needs for a calibrated score of 1, 2.5 and 4."""
    from mlse.calibration.backbone import SHIPPED_DIR, calibration_file, read_calibration

    out = {}
    for name in models:
        path = calibration_file(name, SHIPPED_DIR)
        mapping = read_calibration(path).mapping
        x, y = np.asarray(mapping.x), np.asarray(mapping.y)
        levels = {}
        for level in CALIBRATED_LEVELS:
            above = np.flatnonzero(y >= level)
            levels[f"{level:g}"] = None if above.size == 0 else round(float(np.interp(level, y, x)), 3)
        out[name] = {
            "file": str(path.relative_to(ROOT)),
            "cosine_for_score": levels,
            "cosine_range": [round(float(x[0]), 3), round(float(x[-1]), 3)],
        }
    return out


def map_metrics() -> dict:
    """Exercise 3: the numbers under the map's panels (probe and retrieval@1 do not depend on the projection)."""
    from mlse.analysis.map_sample import flores_sample
    from mlse.analysis.projection import available_spaces, embed_spaces, language_id_accuracy, retrieval_at1
    from mlse.data.pairs import DEFAULT_MAP_LANGS
    from mlse.models import load_model

    sample = flores_sample(DEFAULT_MAP_LANGS, MAP_SENTENCES, seed=0)
    out = {
        "languages": list(DEFAULT_MAP_LANGS),
        "sentences_per_language": MAP_SENTENCES,
        "seed": 0,
        "chance": round(1 / len(DEFAULT_MAP_LANGS), 3),
        "models": {},
    }
    for name in MAP_MODELS:
        model = load_model(name)
        spaces = available_spaces(model)
        embeddings = embed_spaces(model, sample.texts, spaces)
        out["models"][name] = {
            space: {
                "language_id": round(language_id_accuracy(emb, sample.lang_idx, sample.sentence_ids), 3),
                "retrieval_at1": round(retrieval_at1(emb, sample.lang_idx, sample.sentence_ids), 3),
            }
            for space, emb in embeddings.items()
        }
    return out


def tatoeba_margin() -> dict:
    """Exercise 4: errors by cosine and by ratio margin, both directions, and the first error margin fixes."""
    from mlse.evaluation.runners import tatoeba_language
    from mlse.models import load_model

    model = load_model(TATOEBA_MODEL)
    out = {"model": TATOEBA_MODEL, "languages": {}}
    for lang in TATOEBA_LANGS:
        scored = tatoeba_language(model, lang)
        by_cos, by_margin = scored.errors("cosine"), scored.errors("margin")
        entry = {"pairs": len(scored.src), "metrics": {k: round(v, 1) for k, v in scored.metrics.items()}}
        for direction in by_cos:
            wrong_cos = {e["index"]: e for e in by_cos[direction]}
            wrong_margin = {e["index"]: e for e in by_margin[direction]}
            fixed = sorted(set(wrong_cos) - set(wrong_margin))
            made = set(wrong_margin) - set(wrong_cos)
            entry[direction] = {
                "errors_cosine": len(wrong_cos),
                "errors_margin": len(wrong_margin),
                "fixed_by_margin": len(fixed),
                "made_by_margin": len(made),
            }
            if direction == "to_en" and fixed:
                error = wrong_cos[fixed[0]]
                entry["example_fixed"] = {key: (round(v, 3) if isinstance(v, float) else v) for key, v in error.items()}
        out["languages"][lang] = entry
    return out


def finetune_curves() -> dict:
    """Exercise 5: (minutes, dev Spearman x 100) of each curve up to CURVE_MINUTES, plus its next point."""
    out = {}
    for name, (path, kind, command) in CURVES.items():
        data = json.loads((ROOT / path).read_text(encoding="utf-8"))
        if kind == "students":  # one dict per evaluation; elapsed_s counts CPU time / threads
            points = [(p["elapsed_s"] / 60, p["dev_spearman"]) for p in data["curve"]]
        else:  # finetune_compare: {method: [[minutes, dev], ...]}
            points = [tuple(p) for p in data["curves"]["mse"]]
        cut = next((i for i, (m, _) in enumerate(points) if m > CURVE_MINUTES), len(points))
        shown = points[: cut + 1]
        out[name] = {
            "file": path,
            "command": command,
            "points": [[round(m, 1), round(d, 1)] for m, d in shown],
            "start": round(points[0][1], 1),
            "last": round(points[-1][1], 1),
            "last_minutes": round(points[-1][0], 1),
        }
    return out


def markdown(report: dict) -> str:
    lines = [
        "# Teaching guide: the measured observations",
        "",
        f"`{report['command']}` ({report['created']}). Models on the torch backend; every number is computed from "
        "the models and data named here, not timed. The .json records the sha256 of the "
        f"{len(report.get('artifacts', {}))} files in the repository they were computed from (shipped heads, student "
        "and calibrations, the handout, the dev-curve results); a test fails when one changes and this file does not.",
        "",
    ]
    pairs = report["pairs"]
    lines += [
        "## 1. Translation, paraphrase, unrelated (`docs/teaching/lesson-pairs.tsv`)",
        "",
        "Mean cosine / mean calibrated 0-5 score of each kind of pair (5 pairs a cell).",
        "",
    ]
    groups = list(next(iter(pairs["models"].values()))["groups"])
    lines += ["| pairs | " + " | ".join(pairs["models"]) + " |", "|---|" + "---:|" * len(pairs["models"])]
    for group in groups:
        cells = []
        for entry in pairs["models"].values():
            g = entry["groups"][group]
            cells.append(f"{g['cosine']:.3f}" + ("" if g["calibrated"] is None else f" / {g['calibrated']:.2f}"))
        lines.append(f"| {group} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Order per English sentence and language (20 cases): translation > paraphrase > unrelated, and "
        "both related pairs above the unrelated one.",
        "",
        "| model | translation > paraphrase > unrelated | both related above unrelated |",
        "|---|---:|---:|",
    ]
    for name, entry in pairs["models"].items():
        o = entry["order_holds"]
        lines.append(
            f"| {name} | {o['translation>paraphrase>unrelated']} of {o['cases']} | "
            f"{o['both related above unrelated']} of {o['cases']} |"
        )
    lines += [
        "",
        "## 2. The cosine each model needs for a calibrated score",
        "",
        "| model | cosine for 1 | for 2.5 | for 4 | knots span |",
        "|---|---:|---:|---:|---|",
    ]
    for name, entry in report["calibration"].items():
        c = entry["cosine_for_score"]
        cells = [("–" if c[k] is None else f"{c[k]:.3f}") for k in ("1", "2.5", "4")]
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {entry['cosine_range'][0]:.3f} – {entry['cosine_range'][1]:.3f} |"
        )
    m = report["map"]
    lines += [
        "",
        f"## 3. Language vs meaning (FLORES devtest, {len(m['languages'])} languages × "
        f"{m['sentences_per_language']} sentences, chance {m['chance']:.3f})",
        "",
        "| model | space | language-ID probe | translation retrieval@1 |",
        "|---|---|---:|---:|",
    ]
    for name, spaces in m["models"].items():
        for space, v in spaces.items():
            lines.append(f"| {name} | {space} | {v['language_id']:.3f} | {v['retrieval_at1']:.3f} |")
    t = report["tatoeba"]
    lines += [
        "",
        f"## 4. Tatoeba errors of `{t['model']}`: cosine vs ratio margin",
        "",
        "| language | direction | pairs | errors by cosine | errors by margin | fixed by margin | made by margin |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for lang, entry in t["languages"].items():
        for direction in ("to_en", "from_en"):
            d = entry[direction]
            lines.append(
                f"| {lang} | {direction} | {entry['pairs']} | {d['errors_cosine']} | {d['errors_margin']} | "
                f"{d['fixed_by_margin']} | {d['made_by_margin']} |"
            )
    lines += [
        "",
        "Accuracy (%, mean of both directions) by cosine and by margin: "
        + "; ".join(
            f"{lang} {e['metrics']['acc_mean']:.1f} → {e['metrics']['acc_mean_margin']:.1f}"
            for lang, e in t["languages"].items()
        )
        + ".",
    ]
    for lang, entry in t["languages"].items():
        e = entry.get("example_fixed")
        if e:
            lines += [
                "",
                f"An error margin fixes ({lang} → English, row {e['index']}): query *{e['query']}*; "
                f"cosine retrieves *{e['retrieved']}* (cosine {e['sim_retrieved']:.3f}, margin "
                f"{e['margin_retrieved']:.3f}) instead of *{e['gold']}* (cosine {e['sim_gold']:.3f}, margin "
                f"{e['margin_gold']:.3f}).",
            ]
    lines += [
        "",
        f"## 5. The first {CURVE_MINUTES:g} minutes of two dev curves",
        "",
        "Dev = STS Multi MT dev Spearman × 100 (mean of the dev pairs of each study).",
        "",
    ]
    for name, c in report["finetune"].items():
        points = ", ".join(f"{mn} min → {d}" for mn, d in c["points"])
        lines += [
            f"- **{name}** (`{c['file']}`; `{c['command']}`): {points}; last evaluation "
            f"{c['last']} at {c['last_minutes']} min.",
            "",
        ]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.teaching_numbers", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="folder for the two files (default results/teaching)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="minilm-en only, no map, no Tatoeba, into a temporary folder: proves the script runs",
    )
    parser.add_argument("--skip-map", action="store_true", help="leave out exercise 3 (FLORES encoding)")
    parser.add_argument("--report-only", action="store_true", help="rewrite the .md from the .json, measuring nothing")
    args = parser.parse_args(argv)
    args.out = output_dir(args.out, args.quick, ROOT / "results" / "teaching", "teaching-numbers")
    if args.report_only:
        report = json.loads((args.out / "teaching-numbers.json").read_text(encoding="utf-8"))
        atomic_write_text(args.out / "teaching-numbers.md", markdown(report))
        return 0
    from mlse.models import load_model

    started = time.perf_counter()
    models = {name: load_model(name) for name in (["minilm-en"] if args.quick else PAIR_MODELS)}
    report = {
        "command": "python -m benchmarks.teaching_numbers",
        "created": time.strftime("%Y-%m-%d", time.gmtime()),
        "identities": {name: model.identity for name, model in models.items()},
        "artifacts": artifact_hashes(artifact_files(list(models), [] if args.quick else MAP_MODELS), ROOT),
    }
    report["pairs"] = score_lesson_pairs(models)
    print(f"pairs scored ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    report["calibration"] = calibration_levels(models)
    report["map"] = (
        {"languages": [], "sentences_per_language": 0, "chance": 0, "models": {}}
        if args.skip_map or args.quick
        else map_metrics()
    )
    print(f"map metrics ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    report["tatoeba"] = {"model": "(quick mode: not measured)", "languages": {}} if args.quick else tatoeba_margin()
    print(f"tatoeba ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    report["finetune"] = finetune_curves()
    args.out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(args.out / "teaching-numbers.json", json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    text = markdown(report)
    atomic_write_text(args.out / "teaching-numbers.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
