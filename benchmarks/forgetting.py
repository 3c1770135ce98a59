"""No forgetting: a student's Tatoeba accuracy on every LASER language against its base model, and the languages
outside STS Multi MT (Tatoeba ara / tur / ukr, FLORES-200 en-X retrieval) against the stated reference numbers.

    python -m benchmarks.forgetting --student-json t112_student.json --reference-json t112_me5.json \\
        --student shipped/me5-small-student --reference me5-small --out results/unrated
    python -m benchmarks.forgetting --quick --student PATH --reference PATH

The Tatoeba results are ``python -m mlse eval --task tatoeba --langs all --json-out FILE`` of each model (112
languages); without ``--student-json`` / ``--reference-json`` this script runs that evaluation itself (the 112
languages: long on a CPU). :func:`mlse.experiments.forgetting.compare_tatoeba` compares them language by language:
the means, the no-forgetting check (the student at most 2 points below the reference on every language: the
violations are counted and listed) and the ten largest losses. :func:`~mlse.experiments.forgetting.outside_scores`
adds Tatoeba ara / tur / ukr (accuracy, xSIM) and FLORES-200 devtest en-X retrieval for arb_Arab / tur_Latn /
ukr_Cyrl of both models (``--no-outside``: skip), beside the stated reference numbers, and ``--unrated DIR`` adds the
same scores of every leave-languages-out result there that has them.

``--langs ara,tur,ukr`` evaluates those languages only (a cheaper check than the 112; the result names them).
Writes ``<out>/forgetting.json`` and ``forgetting.md`` atomically (default out ``results/unrated``). ``--quick``: three
Tatoeba languages and FLORES on the two given models, a temporary folder unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_dir
from mlse.atomic import atomic_write_text
from mlse.data.portable import portable_record
from mlse.errors import MlseError
from mlse.experiments.forgetting import (
    OUTSIDE_TATOEBA,
    compare_tatoeba,
    forgetting_markdown,
    merge_tatoeba,
    outside_scores,
)

QUICK_LANGS = list(OUTSIDE_TATOEBA)


def tatoeba_result(model: str, path: str | None, langs: list[str] | None, data_dir=None) -> dict:
    """A Tatoeba result: read from ``path`` when given (comma-separated files: parts of one evaluation on disjoint
    languages, merged), else evaluated on ``langs`` (None: every language)."""
    if path:
        parts = []
        for one in [p.strip() for p in path.split(",") if p.strip()]:
            try:
                parts.append(json.loads(Path(one).read_text(encoding="utf-8")))
            except (OSError, ValueError) as exc:
                raise MlseError(f"cannot read the Tatoeba result {one}: {exc}") from None
        return parts[0] if len(parts) == 1 else merge_tatoeba(parts, model)
    from mlse.data.tatoeba import tatoeba_languages
    from mlse.evaluation.runners import run_tatoeba
    from mlse.models import load_model

    chosen = langs or tatoeba_languages(data_dir)
    return run_tatoeba(load_model(model), langs=chosen, data_dir=data_dir, keep_errors=False).to_dict()


def unrated_outside(folder: Path) -> dict[str, dict]:
    """``recipe (run with every rated pair) -> outside scores`` of the protocol's result files under ``folder``."""
    found = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "folds" in data and data.get("outside"):
            found[f"{data['recipe']}{'' if data.get('complete') else ' (incomplete)'}"] = data["outside"]
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.forgetting", description=__doc__.splitlines()[0])
    parser.add_argument("--student", default="shipped/me5-small-student", help="the student (a name, folder or run)")
    parser.add_argument("--reference", default="me5-small", help="the model it must not fall behind")
    parser.add_argument(
        "--student-json",
        default=None,
        help="the student's Tatoeba result; FILE,FILE,...: parts on disjoint languages (else evaluated here)",
    )
    parser.add_argument("--reference-json", default=None, help="the reference's Tatoeba result (else evaluated here)")
    parser.add_argument(
        "--langs",
        type=lambda v: [x.strip() for x in v.split(",") if x.strip()],
        default=None,
        help="evaluate Tatoeba on these languages only, e.g. ara,tur,ukr (default: all 112; ignored for a --*-json)",
    )
    parser.add_argument("--no-outside", action="store_true", help="skip Tatoeba ara/tur/ukr and FLORES retrieval")
    parser.add_argument(
        "--unrated", default=None, help="a protocol results folder whose recipes' outside scores to add"
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="result folder (default results/unrated)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    langs = QUICK_LANGS if args.quick else args.langs
    student = tatoeba_result(args.student, None if args.quick else args.student_json, langs, args.data_dir)
    reference = tatoeba_result(args.reference, None if args.quick else args.reference_json, langs, args.data_dir)
    report = compare_tatoeba(student, reference, names=(args.student, args.reference))
    outside = {}
    if not args.no_outside:
        for name in (args.reference, args.student):
            outside[name] = outside_scores(name, data_dir=args.data_dir)
    if args.unrated:
        outside |= unrated_outside(Path(args.unrated))
    out = output_dir(args.out, args.quick, "results/unrated", "forgetting")
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.forgetting " + " ".join(argv if argv is not None else sys.argv[1:])
    record = portable_record(  # committed under results/: a run folder or --out named portably, never by machine path
        {
            "command": command.strip(),
            "quick": args.quick,
            "student": args.student,
            "reference": args.reference,
            "tatoeba_files": {"student": args.student_json, "reference": args.reference_json},
            "tatoeba": report,
            "outside": outside,
            **machine(),
        },
        args.data_dir,
    )
    table = forgetting_markdown(record["tatoeba"], record["outside"])
    atomic_write_text(out / "forgetting.json", json.dumps(record, indent=1) + "\n")
    atomic_write_text(out / "forgetting.md", f"`{record['command']}`\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
