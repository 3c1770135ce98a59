"""How good would an ensemble teacher be? mUSE and ``me5-small`` averaged, against each alone (issue 30, recipe (c)).

    python -m benchmarks.ensemble_teacher [--models muse,me5-small]
    python -m benchmarks.ensemble_teacher --quick --models A,B

A distillation student learns its teacher's space, so a teacher below the students already trained caps what MSE to
it can give. The ensemble is :class:`mlse.encoders.ensemble.EnsembleEncoder`: each member's unit embedding,
concatenated and scaled by ``1 / sqrt(k)``, so a pair's cosine is the mean of the members' cosines (the MSE target an
ensemble teacher would hand a student through the bridge). Scores: STS Multi MT test Spearman x 100 on en-en and the
cross-12 (with bootstrap CIs), Tatoeba-14 accuracy both ways and xSIM error, each member alone and the ensemble, from
the embedding cache when the members were evaluated before (the baseline runs fill it).

Writes ``<out>/ensemble-teacher.json`` and ``.md`` atomically (default out ``results/students/teachers``). ``--quick``:
en-de and one Tatoeba language, a temporary folder unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from benchmarks.common import QUICK_HELP, machine, output_dir
from mlse.atomic import atomic_write_text
from mlse.data.pairs import CROSS_12, HAM_KIM_14
from mlse.encoders.ensemble import EnsembleEncoder
from mlse.evaluation.runners import run_sts, run_tatoeba
from mlse.models import load_model


def scores(encoder, pairs: list[str], langs: list[str], data_dir=None) -> dict:
    sts = run_sts(encoder, pairs=pairs, data_dir=data_dir).to_dict()
    tatoeba = run_tatoeba(encoder, langs=langs, data_dir=data_dir, keep_errors=False).to_dict()
    spearman = {p: s["spearman"] for p, s in sts["scores"].items()}
    cross = [spearman[p] for p in CROSS_12 if p in spearman]
    return {
        "spearman": spearman,
        "cross-12": float(np.mean(cross)) if cross else None,
        "tatoeba": tatoeba["averages"]["all"]["acc_mean"],
        "xsim": tatoeba["averages"]["all"]["xsim_error"],
    }


def markdown(rows: dict[str, dict], pairs: list[str]) -> str:
    head = "| teacher | cross-12 | Tatoeba acc | xSIM err | " + " | ".join(pairs) + " |"
    lines = [head, "|---|---:|---:|---:|" + "---:|" * len(pairs)]
    for name, r in rows.items():
        cross = "–" if r["cross-12"] is None else f"**{r['cross-12']:.1f}**"
        cells = " | ".join(f"{r['spearman'][p]:.1f}" for p in pairs)
        lines.append(f"| {name} | {cross} | {r['tatoeba']:.1f} | {r['xsim']:.1f} | {cells} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ensemble_teacher", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", default="muse,me5-small", help="the members, comma-separated (default muse,me5-small)"
    )
    parser.add_argument("--out", default=None, help="result folder (default results/students/teachers)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    pairs = ["en-de"] if args.quick else ["en-en", *CROSS_12]
    langs = ["deu"] if args.quick else list(HAM_KIM_14)
    members = [load_model(n) for n in names]
    rows = {n: scores(m, pairs, langs, args.data_dir) for n, m in zip(names, members, strict=True)}
    ensemble = EnsembleEncoder(members, name=" + ".join(names))
    rows[f"ensemble: {ensemble.name}"] = scores(ensemble, pairs, langs, args.data_dir)
    table = markdown(rows, pairs)
    out = output_dir(args.out, args.quick, "results/students/teachers", "ensemble-teacher")
    out.mkdir(parents=True, exist_ok=True)
    command = f"python -m benchmarks.ensemble_teacher --models {','.join(names)}"
    record = {"command": command, "quick": args.quick, "models": names, "rows": rows, **machine()}
    atomic_write_text(out / "ensemble-teacher.json", json.dumps(record, indent=1) + "\n")
    note = "STS Multi MT test Spearman x 100; Tatoeba: mean accuracy of both directions, %; xSIM error %"
    atomic_write_text(out / "ensemble-teacher.md", f"`{command}` ({note})\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
