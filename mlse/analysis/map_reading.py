"""One sentence that says what a language-vs-meaning map shows, written from its numbers.

A Stage-1 head did its job when the language probe does much worse in its meaning space than in its language space,
while translations stay nearest neighbours there (:mod:`mlse.analysis.projection`). Thresholds compare how far above
chance each probe is, so one rule reads samples of any number of languages.
"""

from __future__ import annotations

from collections.abc import Mapping

# (meaning probe - chance) / (language probe - chance): at most SEPARATED -> the languages mix in the meaning space;
# below PARTLY -> partly; from PARTLY up -> the head did not separate them.
SEPARATED = 0.5
PARTLY = 0.85
MEANING_KEPT = 0.5  # meaning-space retrieval@1 from which translations count as "still found"
PROBE = "the language probe (a linear classifier naming each sentence's language)"


def pct(x: float | None) -> str:
    """0.359 -> "35.9 %", 0.5 -> "50 %", None -> "n/a"."""
    if x is None:
        return "n/a"
    return f"{100 * x:.1f}".removesuffix(".0") + " %"


def separation(meaning: float, language: float, chance: float) -> str:
    """How well a Stage-1 head split language from meaning, from the two probe accuracies (0-1) and chance:
    ``"separated"``, ``"partly"`` or ``"not"`` (``"not"`` when the language space's probe is no better than chance)."""
    above = language - chance
    if above <= 0:
        return "not"
    share = (meaning - chance) / above  # how much of the language space's language signal the meaning space keeps
    if share <= SEPARATED:
        return "separated"
    return "partly" if share < PARTLY else "not"


def map_reading(
    probe: Mapping[str, float | None],
    retrieval: Mapping[str, float | None],
    chance: float,
    *,
    no_probe_reason: str | None = None,
) -> str:
    """The one-line reading of a map from its numbers.

    ``probe`` / ``retrieval``: space -> probe accuracy / retrieval@1 (0-1, None if not measurable); a space missing
    from ``probe`` is not in the map. ``no_probe_reason``: why the probe could not be measured.
    """
    if "meaning" not in probe or "language" not in probe:
        raw, raw_retrieval = probe.get("raw"), retrieval.get("raw")
        if raw is None:
            return _no_probe(no_probe_reason)
        found = f" and translation retrieval@1 is {pct(raw_retrieval)}" if raw_retrieval is not None else ""
        return (
            f"Only the raw space is shown (no Stage-1 head): {PROBE} is right {pct(raw)} of the time (chance "
            f"{pct(chance)}){found}; choose a model with a Stage-1 head to see language and meaning pulled "
            "apart."
        )
    meaning, language = probe["meaning"], probe["language"]
    if meaning is None or language is None:
        return _no_probe(no_probe_reason)
    numbers = (
        f"{PROBE} is right {pct(meaning)} of the time there vs {pct(language)} in the language space (chance "
        f"{pct(chance)})"
    )
    mix, outcome = {
        "separated": ("mix", "separated meaning from language"),
        "partly": ("only partly mix", "separated meaning from language only in part"),
        "not": ("stay apart", "did not separate meaning from language on this sample"),
    }[separation(meaning, language, chance)]
    line = f"Languages {mix} in the meaning space: {numbers}, so the head {outcome}"
    kept = retrieval.get("meaning")
    if kept is None:
        return line + "."
    if kept >= MEANING_KEPT:
        return f"{line}; translations are still found as nearest neighbours there (retrieval@1 {pct(kept)})."
    return f"{line}, but translations are rarely found as nearest neighbours there (retrieval@1 {pct(kept)})."


def _no_probe(reason: str | None) -> str:
    why = f" ({reason})" if reason else ""
    return f"No reading: the language probe cannot be measured on this sample{why}."


def reading_of(result) -> str:
    """:func:`map_reading` of a computed :class:`~mlse.analysis.projection.LanguageMap`."""
    views = result.views
    return map_reading(
        {s: v.lang_id_accuracy for s, v in views.items()},
        {s: v.retrieval_at1 for s, v in views.items()},
        result.chance,
        no_probe_reason=result.sample.probe_problem(),
    )
