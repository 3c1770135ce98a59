"""Why this score? in the app: one model's cosine of a pair split into word pairs (:mod:`mlse.explain`).

Opened from the Score tab (:func:`explain_and_keep`), the Tatoeba errors table (:func:`explain_retrieval_error`) and
the largest disagreements (:func:`explain_listed_pair`). Handlers return plotly figures and markdown; failures come
back as the library's message, never as a traceback.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mlse.data.json_safe import finite_or_none
from mlse.errors import MlseError
from mlse.explain import align_tokens, explain_pair
from mlse.text.control_chars import strip_controls
from mlse.ui.explain_figures import alignment_heatmap, attribution_heatmap
from mlse.ui.tables import header
from mlse.ui.text import md_code, md_escape

MAX_CHARS = 300  # per sentence: the cost grows with the square of the tokens; 300 characters is ~60-80 tokens
MAX_STEPS = 64
MAX_LAYER = 24  # the layer picker's last choice (the deepest encoders here have 12 layers)
DEFAULT_LAYER = "default"
TOP_K = 5
RESIDUAL_WARNING = 0.02  # |residual| above 2 % of score − reference terms: the matrix is not to be trusted yet
PAPER = "Moeller, Nikolaev & Padó, “An Attribution Method for Siamese Encoders” (EMNLP 2023)"
TEACHING = (
    "**How to read the heatmap.** A red (positive) cell means that this word pair raises the model's cosine, "
    "compared with the neutral reference input the method starts from. A blue (negative) cell means that the pair "
    "lowers the cosine: the two words pull the sentence vectors apart."
)
ALIGNMENT_NOTE = (
    "The alignment beside it compares the words' contextual vectors (last layer) and marks each word's best match in "
    "the other sentence; it is instant, but it is **not an explanation of the score**: two words can be near-identical "
    "there and still barely move the cosine."
)

Progress = Callable[[float, str], None] | None


# -- input ---------------------------------------------------------------------------------------------------------
def clean_sentence(text, which: str) -> tuple[str, str]:
    """(the sentence without control characters and surrounding space, cut to MAX_CHARS; a notice or "")."""
    kept = strip_controls(text if isinstance(text, str) else "")[0].strip()
    if len(kept) <= MAX_CHARS:
        return kept, ""
    return kept[:MAX_CHARS], f"Sentence {which} was cut to its first {MAX_CHARS} characters to explain it."


def _whole(value, refusal: str, low: float = -np.inf, high: float = np.inf, blank=("",)) -> int | None:
    """None for a blank value (or one of ``blank``: the library's default), else a whole number in [low, high];
    anything else is refused with ``refusal``, the value named."""
    if value is None or (isinstance(value, str) and value.strip() in blank):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = np.nan  # refused below, as a fraction is
    if not np.isfinite(number) or not number.is_integer() or not low <= number <= high:
        raise MlseError(f"{refusal}, got {value!r}")
    return int(number)


def layer_choices(deepest: int = MAX_LAYER) -> list[tuple[str, str]]:
    """(label, value) of the layer picker: the model's default first, then 0 (the word-piece embeddings) to
    ``deepest`` (the library refuses a layer past a model's depth)."""
    return [
        ("the model's default", DEFAULT_LAYER),
        ("0: the word-piece embeddings", "0"),
        *((str(n), str(n)) for n in range(1, deepest + 1)),
    ]


def _fail(model: str, exc: Exception) -> str:
    """The library's own message for an MlseError; anything else named, not shown as a traceback."""
    if isinstance(exc, MlseError):
        return md_escape(str(exc))
    return md_escape(f"{model} could not be explained ({type(exc).__name__}: {str(exc)[:300]})")


# -- text ----------------------------------------------------------------------------------------------------------
def top_pairs_text(explanation, k: int = TOP_K) -> str:
    """The top pairs as "flute ↔ Flöte +0.213 · man ↔ Mann +0.102 ..." (markdown), largest |attribution| first."""
    pairs = explanation.top_pairs(k)
    return " · ".join(f"{md_escape(a)} ↔ {md_escape(b)} **{v:+.3f}**" for a, b, v in pairs) or "(no word pairs)"


def top_words_text(explanation, k: int = 3) -> str:
    """Per sentence, the words whose removal the explanation predicts to cost the most (their word totals)."""
    if explanation.token_terms1 is None:
        return ""
    sides = [
        " · ".join(f"{md_escape(w)} **{v:+.3f}**" for w, v in ranked) or "(none)" for ranked in explanation.top_words(k)
    ]
    return (
        f"Words carrying the most (all their pairs + their own term; removing them lowers the score more than "
        f"removing random words): sentence 1: {sides[0]}; sentence 2: {sides[1]}"
    )


def _share(value: float, whole: float) -> str:
    if abs(whole) <= 1e-12:
        return "–"
    share = round(100 * value / whole, 1)
    return f"{share:+.1f} %" if share else "0.0 %"  # never "-0.0 %"


def decomposition_table(explanation) -> str:
    """score = word pairs + reference terms + residual, as a markdown table with each part's share of what the word
    pairs should account for (score − reference terms)."""
    e = explanation
    target = e.score - e.reference_terms
    special = e.special_terms  # the part of the word pairs in special tokens and the prefix
    rows = [
        ("cosine the model gives (explained)", e.score, ""),
        ("reference terms (what the reference inputs give)", e.reference_terms, ""),
        ("score − reference terms (to be split into word pairs)", target, "100 %"),
        ("word pairs: sum of the matrix", e.attributed, _share(e.attributed, target)),
    ]
    if special:
        rows.append(("… of which in special tokens / the model's prefix", special, _share(special, target)))
    rows.append(("**residual** (integration error)", e.residual, _share(e.residual, target)))
    lines = ["| part | value | share |", "|---|---|---|"]
    lines += [f"| {name} | {value:+.4f} | {share} |" for name, value, share in rows]
    return "\n".join(lines) + "\n\nShares are of score − reference terms: what the word pairs have to account for."


def residual_note(explanation) -> str:
    target = abs(explanation.score - explanation.reference_terms)
    if target > 1e-12 and abs(explanation.residual) > RESIDUAL_WARNING * target:
        return (
            f"**The residual is {100 * abs(explanation.residual) / target:.1f} % of what is to be split** (over "
            f"{100 * RESIDUAL_WARNING:.0f} %): the matrix does not add up yet; raise the steps or attribute at a "
            "later layer."
        )
    return ""


def method_line(explanation) -> str:
    return (
        f"Integrated Jacobians at layer {explanation.layer} (0 = the word-piece embeddings), {explanation.steps} "
        f"steps, {explanation.precision} products, {explanation.seconds:.1f} s; method of {PAPER}."
    )


def explanation_text(explanation, title: str) -> str:
    """The markdown beside a heatmap: what is explained, the top pairs, the decomposition, the method."""
    parts = [
        f"{title} — cosine **{explanation.score:.4f}**",
        f"Top {TOP_K} word pairs: {top_pairs_text(explanation)}",
        top_words_text(explanation),
        decomposition_table(explanation),
        residual_note(explanation),
        method_line(explanation),
    ]
    return "\n\n".join(p for p in parts if p)


def alignment_text(alignment) -> str:
    shown = " · ".join(f"{md_escape(a)} ↔ {md_escape(b)} ({c:.2f})" for a, b, c in alignment.mutual()) or "none"
    return f"Alignment, words that are each other's best match: {shown}. {ALIGNMENT_NOTE}"


def heatmap(explanation, title: str, show_special: bool = False):
    """The attribution heatmap: without special tokens and the prefix unless asked for."""
    e = explanation
    words1, words2, matrix = (e.words1, e.words2, e.matrix) if show_special else e.words_only()
    return attribution_heatmap(list(words1), list(words2), np.asarray(matrix), title)


# -- handlers ------------------------------------------------------------------------------------------------------
def explain_and_keep(
    state,
    model: str | None,
    sentence1: str | None,
    sentence2: str | None,
    steps=None,
    layer=None,
    show_special: bool = False,
    progress: Progress = None,
):
    """Explain ``model``'s cosine of the pair -> (attribution heatmap or None, alignment heatmap or None, markdown,
    What if?'s start {"model", "explanation"} or None). ``steps`` / ``layer``: None for the library's defaults."""
    (s1, n1), (s2, n2) = clean_sentence(sentence1, "1"), clean_sentence(sentence2, "2")
    notices = [n for n in (n1, n2) if n]
    if not s1 or not s2:
        return None, None, "Enter two non-empty sentences to explain.", None
    if not (model or "").strip():
        return None, None, "Choose a model to explain.", None
    say = progress or (lambda share, what: None)
    try:
        steps = _whole(steps, f"steps must be a whole number from 1 to {MAX_STEPS}", 1, MAX_STEPS)
        refusal = "layer must be a whole number (0 = the word-piece embeddings)"  # its range: the library's check
        layer = _whole(layer, refusal, blank=("", DEFAULT_LAYER))
        say(0.05, f"loading {model}")
        encoder = state.encoder(model)
        say(0.2, "attributing the cosine to word pairs (integrated Jacobians)")
        explanation = explain_pair(encoder, s1, s2, steps=steps, layer=layer)
        say(0.9, "aligning the words")
        alignment = align_tokens(encoder, s1, s2)
    except Exception as exc:  # the library's message (MlseError); anything else named, never a traceback
        return None, None, " ".join([_fail(model, exc), *notices]), None
    title = f"**{md_escape(model)}** explains its cosine of sentence 1 (rows) and sentence 2 (columns)"
    text = "\n\n".join([*notices, explanation_text(explanation, title), alignment_text(alignment)])
    return (
        heatmap(explanation, f"{model}: cosine {explanation.score:.4f}", show_special),
        alignment_heatmap(alignment),
        text,
        {"model": model, "explanation": explanation},
    )


def explain_listed_pair(
    state,
    model: str | None,
    sentence1: str | None,
    sentence2: str | None,
    gold=None,
    listed_cosine=None,
    label: str = "",
    progress: Progress = None,
):
    """A row of the largest-disagreements table explained with ``model`` -> (attribution heatmap, alignment heatmap,
    markdown)."""
    if not (sentence1 or "").strip() and not (sentence2 or "").strip():
        return None, None, "Select a row of the largest-disagreements table first, then press *Explain this pair*."
    attribution, alignment, text, _ = explain_and_keep(state, model, sentence1, sentence2, progress=progress)
    if attribution is None:
        return None, None, text
    gold, listed_cosine = finite_or_none(gold), finite_or_none(listed_cosine)
    facts = [
        f"pair {md_escape(label)}" if label else "",
        f"gold **{gold:.2f}**" if gold is not None else "",
        f"listed cosine {listed_cosine:.4f}" if listed_cosine is not None else "",
    ]
    heading = "From the largest disagreements: " + ", ".join(f for f in facts if f) + "."
    return attribution, alignment, f"{heading}\n\n{text}"


def explain_retrieval_error(
    state,
    model: str | None,
    query: str | None,
    retrieved: str | None,
    gold: str | None,
    label: str = "",
    progress: Progress = None,
):
    """A Tatoeba retrieval error explained with the scorer that made it -> (query vs retrieved heatmap, query vs
    gold heatmap, summary, the two pairs' markdown); figures None and the summary saying why when nothing was."""
    texts = [clean_sentence(t, w) for t, w in ((query, "query"), (retrieved, "retrieved"), (gold, "gold"))]
    (q, _), (r, _), (g, _) = texts
    if not (q and r and g):
        return None, None, "Select a row of the errors table first, then press *Explain this error*.", "", ""
    if not (model or "").strip():
        return None, None, "Choose a scorer.", "", ""
    say = progress or (lambda share, what: None)
    try:
        say(0.05, f"loading {model}")
        encoder = state.encoder(model)
        say(0.15, "attributing query vs retrieved")
        wrong = explain_pair(encoder, q, r)
        say(0.55, "attributing query vs gold")
        right = explain_pair(encoder, q, g)
    except Exception as exc:  # the library's message (MlseError); anything else named, never a traceback
        return None, None, _fail(model, exc), "", ""
    notices = [n for _, n in texts if n]
    summary = (
        f"**{md_escape(model)}**{' on ' + md_escape(label) if label else ''}: the retrieved sentence scores "
        f"{wrong.score:.4f}, the gold {right.score:.4f} ({wrong.score - right.score:+.4f}). Rows: the "
        "query's words; columns: the candidate's. Compare the two heatmaps for the word pairs that lift the "
        "wrong candidate or hold the gold back."
    )
    return (
        heatmap(wrong, f"query vs retrieved: cosine {wrong.score:.4f}"),
        heatmap(right, f"query vs gold: cosine {right.score:.4f}"),
        "\n\n".join([*notices, summary]),
        explanation_text(wrong, "**Query vs retrieved**"),
        explanation_text(right, "**Query vs gold**"),
    )


# -- rows of the tabs' tables --------------------------------------------------------------------------------------
def row_cells(row, columns: list[str]) -> dict:
    """A table row (a dict, a list in ``columns`` order, or a pandas Series) -> {column: value}; else {}."""
    if hasattr(row, "to_dict"):
        row = row.to_dict()
    if isinstance(row, dict):
        return dict(row)
    if isinstance(row, (list, tuple)):
        return dict(zip(columns, row))
    return {}


def picked_error(shown, row, columns: list[str]) -> dict | None:
    """What "Explain this error" needs from a selected Tatoeba errors row: the scorer the table was made with
    (``shown`` = (source, model)) and the three sentences; None when the row or the table is missing."""
    cells = row_cells(row, columns)
    if not shown or not all(isinstance(cells.get(c), str) for c in ("query", "retrieved", "gold")):
        return None
    label = f"{cells.get('direction', '')} #{cells.get('row', cells.get('index', ''))}".strip()
    return {"model": shown[1], **{c: cells[c] for c in ("query", "retrieved", "gold")}, "label": label}


def picked_pair(row, columns: list[str]) -> dict | None:
    """What "Explain this pair" needs from a selected disagreements row: the two sentences, the gold and the
    listed cosine, and the first cell as its label; None for an unusable row."""
    cells = row_cells(row, columns)
    s1, s2 = (cells.get(header(f), cells.get(f)) for f in ("sentence1", "sentence2"))  # shown as "sentence 1"
    if not (isinstance(s1, str) and isinstance(s2, str)):
        return None
    first = columns[0] if columns else "index"
    label = f"{first} {cells[first]}" if cells.get(first) not in (None, "") else ""
    return {"sentence1": s1, "sentence2": s2, "gold": cells.get("gold"), "cosine": cells.get("cosine"), "label": label}


# -- which models -------------------------------------------------------------------------------------------------
def explainable_models(state) -> list[str]:
    """The models offered for explaining: plain encoders on torch (a scorer's heads are not a dot product of two
    sentence vectors, and ONNX has no gradients): :func:`mlse.serving.api_route.explainable`."""
    from mlse.serving.api_route import explainable

    return explainable(state)


def default_explained(state, ticked, current: str | None = None) -> str | None:
    """``current`` while it is still offered, else the first ticked model that can be explained, else the first."""
    offered = explainable_models(state)
    if current in offered:
        return current
    ticked = [ticked] if isinstance(ticked, str) else list(ticked or [])
    return next((n for n in ticked if n in offered), offered[0] if offered else None)


def unavailable_note(state) -> str:
    """Why nothing can be explained here ("" when something can)."""
    if getattr(state, "backend", "torch") != "torch":
        return (
            f"Models run on `{md_code(state.backend)}` here, which has no gradients: start the app with the torch "
            "backend (`--backend torch`) to explain scores."
        )
    return "" if explainable_models(state) else "No model that can be explained loads here."
