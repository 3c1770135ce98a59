"""What if? under Why this score?: edit the explained pair (or tick words to drop) and see the new score, its 0-5
value, the new heatmap beside the old one, and the change of the cosine beside the change the explanation predicted.

Plain handlers (:mod:`mlse.ui.explain_sections` wires them) on ``kept = {"model": name, "explanation": Explanation}``;
:func:`mlse.explain.what_if` does the rest. Refusals come back as a message, never as a traceback.
"""

from __future__ import annotations

from mlse.explain import what_if
from mlse.explain.edits import droppable, without_words
from mlse.ui.explain_view import Progress, _fail, clean_sentence, heatmap
from mlse.ui.text import md_escape

INTRO = (
    "### What if?\nTick words to drop them (the boxes below follow), or edit either sentence, then press *What if?*: "
    "the edited pair is scored as *Score a pair* scores it and explained again, with the same setting. When the edit "
    "deletes whole words, the change of the cosine is set beside the change the explanation predicted for them: "
    "everything those words contribute (their row or column of the heatmap plus their own term against the other "
    "sentence's reference)."
)
EXPLAIN_FIRST = "Explain a pair first (*Explain* above); What if? edits the pair that was explained."
EXPLAINING = "*Explaining the edited pair for the heatmap on the right…*"
SEPARATOR = ":"  # a picker value is "<sentence>:<word index>"


def _explanation(kept):
    return kept.get("explanation") if isinstance(kept, dict) else None


def word_choices(kept) -> list[tuple[str, str]]:
    """(label, value) of every word that can be dropped: "1 · children" -> "1:1" (special tokens and the model's prefix
    are not words of the sentence). [] before anything was explained."""
    e = _explanation(kept)
    if e is None:
        return []
    return [
        (f"{side} · {words[k]}", f"{side}{SEPARATOR}{k}")
        for side, words in ((1, e.words1), (2, e.words2))
        for k in droppable(e, side)
    ]


def start_what_if(kept) -> tuple[str, str, list[tuple[str, str]]]:
    """After an explanation: both edit boxes hold the explained sentences, and the picker offers their words."""
    e = _explanation(kept)
    if e is None:
        return "", "", []
    return e.sentence1, e.sentence2, word_choices(kept)


def drop_picked(kept, picked) -> tuple[str, str]:
    """The explained sentences without the ticked words (what the edit boxes show after a tick)."""
    e = _explanation(kept)
    if e is None:
        return "", ""
    offered = {value for _, value in word_choices(kept)}  # "<1 or 2>:<word index>", as word_choices writes them
    rows, cols = [], []
    for value in (p for p in picked or [] if p in offered):
        side, _, index = value.partition(SEPARATOR)
        (rows if side == "1" else cols).append(int(index))
    return (without_words(e, 1, rows) if rows else e.sentence1, without_words(e, 2, cols) if cols else e.sentence2)


def _change_line(name: str, before: float, after: float, digits: int) -> str:
    return f"{name} {before:.{digits}f} → **{after:.{digits}f}** (change **{after - before:+.{digits}f}**)"


def what_if_text(change) -> str:
    """The markdown beside the two heatmaps: old vs new score (and 0-5), the edit, the prediction per word."""
    w = change
    scores = [_change_line("cosine", w.score, w.new_score, 4)]
    if w.calibrated_delta is not None:
        scores.append(_change_line("0-5", w.calibrated, w.new_calibrated, 2))
    parts = [f"**What if?** {md_escape(w.model)}: " + "; ".join(scores) + "."]
    for n, (before, after) in enumerate(((w.sentence1, w.edited1), (w.sentence2, w.edited2)), 1):
        if after != before:
            parts.append(f"Sentence {n} now reads: “{md_escape(after)}”")
    if w.predicted_parts is None:
        parts.append(
            "This edit is not a deletion of whole words, so the explanation makes no prediction for it (it splits "
            "the score between the words that are there); compare the two heatmaps."
        )
        return "\n\n".join(parts)
    pairs, own, missed = w.predicted_parts
    parts.append(
        f"The explanation predicted **{w.predicted_delta:+.4f}** for deleting these words (minus what they contribute: "
        f"their word pairs {pairs:+.4f}, their own terms {own:+.4f}); the cosine moved {w.delta:+.4f}, so it missed "
        f"{missed:+.4f}: what the words' removal did to the other words' context, the length "
        "and the positions, which the attribution of the original pair does not see."
    )
    lines = [
        "| sentence | word dropped | its word pairs (row / column sum) | its own term | total |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['sentence']} | {md_escape(r['word'])} | {r['pairs']:+.4f} | {r['own_term']:+.4f} | {r['total']:+.4f} |"
        for r in w.word_effects()
    ]
    parts.append("\n".join(lines))
    return "\n\n".join(parts)


def what_if_pair(
    state, kept, edited1, edited2, show_special: bool = False, progress: Progress = None, explain_new: bool = True
):
    """Score and explain the edited pair -> (the original's heatmap, the edited pair's heatmap, markdown); the
    figures are None and the markdown says why when nothing was computed. ``explain_new=False``: the numbers only."""
    e = _explanation(kept)
    if e is None:
        return None, None, EXPLAIN_FIRST
    model = kept.get("model") or e.model
    (s1, n1), (s2, n2) = clean_sentence(edited1, "1"), clean_sentence(edited2, "2")
    notices = [n for n in (n1, n2) if n]
    if not s1 or not s2:
        return None, None, "Both sentences must keep at least one word: undo the edit that emptied one."
    say = progress or (lambda share, what: None)
    try:
        say(0.05, f"loading {model}")
        encoder = state.encoder(model)
        batcher = getattr(state, "batcher", None)
        say(0.2, "scoring and explaining the edited pair")
        change = what_if(
            encoder,
            e.sentence1,
            e.sentence2,
            edited1=s1,
            edited2=s2,
            explanation=e,
            explain_new=explain_new,
            encode=batcher.encode if batcher is not None else None,
        )
    except Exception as exc:  # the library's message (MlseError); anything else named, never a traceback
        return None, None, " ".join([_fail(model, exc), *notices])
    after = change.new_explanation
    return (
        heatmap(e, f"before: cosine {change.score:.4f}", show_special),
        None if after is None else heatmap(after, f"after: cosine {change.new_score:.4f}", show_special),
        "\n\n".join([*notices, what_if_text(change), *([] if after is not None else [EXPLAINING])]),
    )
