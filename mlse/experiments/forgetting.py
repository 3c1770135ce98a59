"""Languages outside STS Multi MT: what a student keeps where it saw no rated pairs, and what it must not forget.

* :func:`outside_scores`: Tatoeba ara / tur / ukr and FLORES-200 devtest en-X retrieval, the bitext's languages
  without STS Multi MT ratings (:mod:`mlse.experiments.unrated` scores every recipe this way).
* :func:`compare_tatoeba`: two Tatoeba results over the same languages, per-language differences and the
  no-forgetting check (no language more than :data:`TOLERANCE` points below the reference).
"""

from __future__ import annotations

import math

import numpy as np

from mlse.errors import MlseError

OUTSIDE_TATOEBA = ("ara", "tur", "ukr")
OUTSIDE_FLORES = ("arb_Arab", "tur_Latn", "ukr_Cyrl")
ENGLISH_FLORES = "eng_Latn"
TOLERANCE = 2.0  # points of Tatoeba accuracy a student may be below the reference on a language
N_LOSSES = 10
METRIC = "acc_mean"  # the Tatoeba number compared: accuracy, mean of both directions
# Tatoeba acc_mean on ara / tur / ukr as the study's target states them (today's shipped student, and me5-small)
ISSUE_REFERENCE = {
    "student (stated target)": {"ara": 84.8, "tur": 93.9, "ukr": 90.0},
    "me5-small (stated reference)": {"ara": 79.1, "tur": 89.5, "ukr": 82.7},
}


def outside_scores(encoder, *, data_dir=None) -> dict:
    """Tatoeba and FLORES-200 en-X retrieval of ``encoder`` (a model name, folder or loaded encoder) on languages
    outside STS Multi MT: ``{"tatoeba": {lang: {acc_mean, acc_to_en, acc_from_en, xsim_error}}, "flores": {code:
    {acc_en_to_x, acc_x_to_en, acc_mean, xsim_error}}, "model": ...}``."""
    from mlse.data.flores import load_flores  # lazy: the evaluation stack loads models
    from mlse.evaluation.retrieval import retrieval_accuracy, xsim_error
    from mlse.evaluation.runners import encode_lookup, run_tatoeba
    from mlse.models import load_model

    model = load_model(encoder) if isinstance(encoder, str) else encoder
    out: dict = {"model": getattr(model, "name", str(encoder)), "identity": getattr(model, "identity", None)}
    tat = run_tatoeba(model, langs=list(OUTSIDE_TATOEBA), data_dir=data_dir, keep_errors=False)
    keys = ("acc_mean", "acc_to_en", "acc_from_en", "xsim_error")
    out["tatoeba"] = {lang: {k: round(float(s[k]), 2) for k in keys} for lang, s in tat.scores.items()}
    flores = load_flores([ENGLISH_FLORES, *OUTSIDE_FLORES], data_dir)
    lookup = encode_lookup(model, [t for lines in flores.values() for t in lines])
    english = np.stack([lookup[t] for t in flores[ENGLISH_FLORES]])  # [n, d]
    out["flores"] = {}
    for code, lines in flores.items():
        if code == ENGLISH_FLORES:
            continue
        other = np.stack([lookup[t] for t in lines])  # [n, d]
        to_x, to_en = retrieval_accuracy(english, other), retrieval_accuracy(other, english)
        out["flores"][code] = {
            "acc_en_to_x": round(to_x, 2),
            "acc_x_to_en": round(to_en, 2),
            "acc_mean": round((to_x + to_en) / 2, 2),
            "xsim_error": round(xsim_error(other, english), 2),
            "n": len(lines),
        }
    return out


def _accuracies(result: dict, name: str) -> dict[str, float]:
    """``{lang: acc_mean}`` of a Tatoeba result (an EvalResult's JSON: ``scores`` per language)."""
    scores = result.get("scores") if isinstance(result, dict) else None
    if not isinstance(scores, dict) or not scores:
        raise MlseError(f"{name}: not a Tatoeba result (no per-language 'scores'); make one with python -m mlse eval")
    missing = [lang for lang, s in scores.items() if not isinstance(s, dict) or METRIC not in s]
    if missing:
        raise MlseError(f"{name}: no {METRIC!r} for {', '.join(missing[:5])}")
    return {lang: float(s[METRIC]) for lang, s in scores.items()}


def merge_tatoeba(results: list[dict], name: str = "model") -> dict:
    """One Tatoeba result from several of the same model on disjoint languages (a long evaluation run in parts).

    Parts must share ``model_identity`` and no language may appear twice (else an MlseError says which)."""
    if not results:
        raise MlseError(f"{name}: no Tatoeba result to merge")
    identities = {r.get("model_identity") for r in results}
    if len(identities) > 1:
        raise MlseError(f"{name}: the parts come from different models: {', '.join(sorted(map(str, identities)))}")
    merged = dict(results[0], scores={})
    for part in results:
        _accuracies(part, name)  # each part is a Tatoeba result
        twice = sorted(set(part["scores"]) & set(merged["scores"]))
        if twice:
            raise MlseError(f"{name}: languages in more than one part: {', '.join(twice)}")
        merged["scores"] = merged["scores"] | part["scores"]
    merged.pop("averages", None)  # the parts' averages are over their own languages only
    merged["config"] = dict(results[0].get("config") or {}, langs=sorted(merged["scores"]))
    return merged


def compare_tatoeba(
    student: dict, reference: dict, *, n_losses: int = N_LOSSES, names: tuple[str, str] = ("student", "reference")
) -> dict:
    """The student's Tatoeba ``acc_mean`` against the reference's, language by language (see the module docstring).

    Both must cover the same languages (else an MlseError). Returns ``n_langs``, the means and their difference,
    ``violations`` (more than :data:`TOLERANCE` below, worst first), ``largest_losses`` and ``per_language``."""
    a = _accuracies(student, names[0])
    b = _accuracies(reference, names[1])
    if set(a) != set(b):
        only_a, only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
        raise MlseError(
            f"the Tatoeba results cover different languages: only {names[0]}: {', '.join(only_a) or 'none'}; "
            f"only {names[1]}: {', '.join(only_b) or 'none'}"
        )
    rows = [
        {
            "lang": lang,
            "student": round(a[lang], 2),
            "reference": round(b[lang], 2),
            "difference": round(a[lang] - b[lang], 2),
        }
        for lang in sorted(a)
    ]
    worst_first = sorted(rows, key=lambda r: (r["difference"], r["lang"]))
    return {
        "metric": METRIC,
        "names": {"student": names[0], "reference": names[1]},
        "n_langs": len(rows),
        "mean_student": round(float(np.mean([r["student"] for r in rows])), 2),
        "mean_reference": round(float(np.mean([r["reference"] for r in rows])), 2),
        "mean_difference": round(float(np.mean([r["difference"] for r in rows])), 2),
        "tolerance": TOLERANCE,
        "violations": [r for r in worst_first if r["difference"] < -TOLERANCE],
        "n_violations": sum(r["difference"] < -TOLERANCE for r in rows),
        "largest_losses": worst_first[:n_losses],
        "per_language": {r["lang"]: {k: r[k] for k in ("student", "reference", "difference")} for r in rows},
    }


def forgetting_markdown(report: dict, outside: dict[str, dict] | None = None) -> str:
    """The comparison as markdown: the means and the check, the largest losses, and (``outside``: model ->
    :func:`outside_scores`) the languages outside STS Multi MT."""
    s, r = report["names"]["student"], report["names"]["reference"]
    verdict = "passes" if report["n_violations"] == 0 else "fails"
    violations = ", ".join(f"{v['lang']} {v['difference']:+.1f}" for v in report["violations"])
    lines = [
        f"| Tatoeba ({report['n_langs']} languages, {report['metric']}) | {s} | {r} | difference |",
        "|---|---:|---:|---:|",
        f"| mean | {report['mean_student']:.1f} | {report['mean_reference']:.1f} | {report['mean_difference']:+.1f} |",
        "",
        f"No-forgetting check ({s} at most {report['tolerance']:g} points below {r} on every language): **{verdict}**, "
        f"{report['n_violations']} violation(s){': ' + violations if violations else ''}.",
        "",
        f"The {len(report['largest_losses'])} largest losses:",
        "",
        f"| language | {s} | {r} | difference |",
        "|---|---:|---:|---:|",
    ]
    lines += [
        f"| {x['lang']} | {x['student']:.1f} | {x['reference']:.1f} | {x['difference']:+.1f} |"
        for x in report["largest_losses"]
    ]
    if outside:
        lines += ["", outside_markdown(outside)]
    return "\n".join(lines)


def outside_markdown(outside: dict[str, dict]) -> str:
    """Tatoeba ara / tur / ukr (acc_mean, xSIM) and FLORES-200 en-X retrieval per model, the issue's numbers first."""
    head = [f"Tatoeba {lang}" for lang in OUTSIDE_TATOEBA] + [f"xSIM {lang}" for lang in OUTSIDE_TATOEBA]
    head += [f"FLORES en-{code.split('_')[0]}" for code in OUTSIDE_FLORES]
    lines = ["| model | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
    for name, values in ISSUE_REFERENCE.items():
        cells = [f"{values[lang]:.1f}" for lang in OUTSIDE_TATOEBA] + ["–"] * (len(head) - len(OUTSIDE_TATOEBA))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name, scores in outside.items():
        tat, flo = scores.get("tatoeba") or {}, scores.get("flores") or {}
        cells = [cell(tat.get(lang, {}).get("acc_mean")) for lang in OUTSIDE_TATOEBA]
        cells += [cell(tat.get(lang, {}).get("xsim_error")) for lang in OUTSIDE_TATOEBA]
        cells += [cell(flo.get(code, {}).get("acc_mean")) for code in OUTSIDE_FLORES]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cell(value) -> str:
    """A table cell of one decimal; "–" for a number not there (None, NaN)."""
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.1f}"
