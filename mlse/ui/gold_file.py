"""The predicted-vs-gold tab on the user's own rated pairs: an uploaded or pasted file with sentence1, sentence2,
score (optional lang1, lang2).

Cosines are memoised per (model identity, pairs); metrics and figures come from :mod:`mlse.ui.gold_views`, slices
from :mod:`mlse.analysis.slices`. ``file`` may be a UserTable already read (a public deployment deletes uploads).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from mlse.analysis.slices import (
    LANGUAGE_PAIR,
    LENGTH,
    MIN_CI_PAIRS,
    MIN_PAIRS,
    SLICE_COLUMNS,
    language_pair_labels,
    languages_or_detected,
    length_bands,
    pair_lengths,
    slice_rows,
)
from mlse.data.user_files import UserTable, parse_range
from mlse.data.user_table import ROLE_NAMES
from mlse.dirs import assets_dir
from mlse.encoders.catalogue import chosen_models
from mlse.encoders.protocol import similarity
from mlse.errors import MlseError
from mlse.memo import MB, BytesMemo
from mlse.ui.gold_views import (
    CALIBRATED_NOTE,
    DISAGREE_COLUMNS,
    METRIC_COLUMNS,
    N_BOOT,
    RATED,
    RATED_SLICE,
    UNKNOWN,
    UNRATED,
    compare,
    disagreement_request,
    disagreement_table,
    empty_figures,
    model_rated_languages,
    rated_labels,
)
from mlse.ui.tables import headers, numbers_as_text
from mlse.ui.text import md_code, md_escape
from mlse.ui.uploads import read_message, read_upload, upload_path
from mlse.ui.widgets import upload_with_option

EXAMPLE = assets_dir() / "examples" / "rated_pairs.tsv"
FILE_DISAGREE_COLUMNS = ["line", *DISAGREE_COLUMNS[1:]]
SLICE_HEADERS = headers(SLICE_COLUMNS)  # slice, value, model, n, Pearson, Pearson low, ..., note
SLICE_PLACES = dict.fromkeys(SLICE_COLUMNS[4:-1], 1)  # correlations x 100, as the metrics table writes them

# (model identity, digest of the pairs) -> cosine predictions [n]; digest of pairs and languages -> languages
_memo = BytesMemo("gold_file.predictions", 16 * MB)
_languages = BytesMemo("gold_file.languages", 4 * MB)


def _digest(*columns: list[str] | None) -> str:
    return hashlib.sha256(json.dumps(columns, ensure_ascii=False).encode("utf-8")).hexdigest()


def load_rated(file, pasted: str | None, gold_range: str | None = "") -> tuple[UserTable | None, str]:
    """(the rated pairs, or None; a markdown message) from an upload, pasted rows or a table already read; a table
    without a score column or with too few pairs is refused. ``gold_range``: "LOW:HIGH" (rows outside are skipped)."""
    if isinstance(file, UserTable):
        table, message = file, read_message(file)
    else:
        try:
            bounds = parse_range(gold_range)
        except MlseError as exc:
            return None, md_escape(str(exc))
        table, message = read_upload(file, pasted, kind="pairs", gold_range=bounds)
        if table is None:
            return None, message
    if table.kind != "pairs" or "gold" not in table.roles:
        names = ", ".join(ROLE_NAMES["gold"][:4])
        return None, (
            f"{message}\n\n**{md_escape(table.name)} has no score column.** This tab needs a score column "
            f"(named {names}, or the third column of a file without header) with a gold rating per pair; "
            "*Score a file* in the first tab (Score a pair) scores files without gold."
        )
    if len(table) < MIN_PAIRS:
        return None, f"{message}\n\nAt least {MIN_PAIRS} rated pairs are needed to compare with gold."
    return table, message


def file_predictions(state, table: UserTable, model: str) -> np.ndarray:
    """Cosine of each pair of ``table`` under ``model`` [n], memoised per model identity and the pairs' text."""
    if not (model or "").strip():
        raise MlseError("Choose a model.")
    encoder = state.encoder(model)  # ModelNotFoundError for an unknown model
    s1, s2 = table.role("sentence1"), table.role("sentence2")

    def compute() -> np.ndarray:
        return np.asarray(similarity(encoder, s1, s2)[0], dtype=np.float64)

    return _memo.get_or_compute((encoder.identity, _digest(s1, s2)), compute)


def pair_languages(table: UserTable) -> tuple[list[str], list[str], int]:
    """(language of each first sentence, of each second sentence, how many were detected): the lang1 / lang2 columns
    where the file has them, else detected (memoised per content)."""
    s1, s2 = table.role("sentence1"), table.role("sentence2")
    given1, given2 = table.role("lang1"), table.role("lang2")

    def compute():
        lang1, d1 = languages_or_detected(s1, given1)
        lang2, d2 = languages_or_detected(s2, given2)
        return lang1, lang2, d1 + d2

    return _languages.get_or_compute(_digest(s1, s2, given1, given2), compute)


def file_slices(
    table: UserTable,
    preds: dict[str, np.ndarray],
    gold: np.ndarray,
    n_boot: int = N_BOOT,
    rated: dict[str, tuple[str, ...]] | None = None,
) -> tuple[pd.DataFrame, str]:
    """(slices table: one row per (slice, model), a note on how the slices were made). ``rated``: model -> the
    languages it learnt rated pairs in; such a model also gets its own :data:`~mlse.ui.gold_views.RATED_SLICE`."""
    s1, s2 = table.role("sentence1"), table.role("sentence2")
    lang1, lang2, detected = pair_languages(table)
    labels = language_pair_labels(lang1, lang2)
    bands, order = length_bands(pair_lengths(s1, s2, lang1, lang2))
    rows = slice_rows(preds, gold, {LANGUAGE_PAIR: (labels, None), LENGTH: (bands, order)}, n_boot=n_boot)
    for name, langs in (rated or {}).items():
        if name in preds:
            split = rated_labels(lang1, lang2, langs)
            present = [v for v in (RATED, UNRATED, UNKNOWN) if v in set(split)]
            rows += slice_rows({name: preds[name]}, gold, {RATED_SLICE: (split, present)}, n_boot=n_boot)
    table_df = numbers_as_text(pd.DataFrame(rows, columns=SLICE_COLUMNS), SLICE_PLACES).set_axis(SLICE_HEADERS, axis=1)
    if detected:
        has = [r for r in ("lang1", "lang2") if r in table.roles]
        where = "the file gives no language" if not has else f"where the file gives none ({', '.join(has)} given)"
        langs = f"Languages of {detected:,} sentence(s) were **detected** (langid; {where}), so may be wrong."
    else:
        langs = "Language pairs from the file's lang1 / lang2 columns."
    note = (
        f"Slices: {langs} Length bands: terciles of the pair's mean length in words (characters for Chinese, "
        f"Japanese, Thai). No correlation under {MIN_PAIRS} pairs, no CI under {MIN_CI_PAIRS}."
    )
    if rated:
        note += (
            f" *{RATED_SLICE}*: for a model trained on rated pairs of only some languages (a run of the "
            "leave-languages-out protocol), a pair is *rated* when it learnt from rated pairs in both languages, "
            "else *unrated* — "
            + "; ".join(f"`{md_code(name)}` rated: {md_escape(', '.join(langs))}" for name, langs in rated.items())
            + "."
        )
    return table_df, note


def _no_results():
    """Empty figures and tables: what the page shows when there is nothing to compare."""
    return *empty_figures(), pd.DataFrame(columns=METRIC_COLUMNS), pd.DataFrame(columns=SLICE_HEADERS)


def compare_file(
    state, file, pasted: str | None, models: list[str] | str, gold_range: str | None = "", n_boot: int = N_BOOT
):
    """Distributions, scatter, calibration, metrics and slices of each model's cosine against the file's scores, as
    :func:`mlse.ui.gold_tab.predicted_vs_gold` -> (the three figures, metrics, slices, message)."""
    models = chosen_models(models)[0]  # the ticked names, once each
    if not models:
        return *_no_results(), "Choose at least one model."
    table, message = load_rated(file, pasted, gold_range)
    if table is None:
        return *_no_results(), message
    preds, problems = {}, []
    for name in models:
        try:
            preds[name] = file_predictions(state, table, name)  # [n]
        except MlseError as exc:
            problems.append(md_escape(str(exc)))
    if not preds:
        return *_no_results(), "\n\n".join([message, " ".join(problems)])
    gold = table.gold  # [n]
    hist, scatter, calib, metrics, calibrated = compare(state, gold, preds, table.name, n_boot)
    slices, slice_note = file_slices(table, preds, gold, n_boot, model_rated_languages(state, list(preds)))
    notes = [f"{len(gold):,} rated pairs; correlations x 100, 95% bootstrap CIs."]
    if calibrated:
        notes.append(f"{CALIBRATED_NOTE}your scores; meaningful when they are on the 0–5 STS scale.")
    return hist, scatter, calib, metrics, slices, "\n\n".join([message, " ".join(notes), slice_note, *problems])


def file_disagreements(
    state,
    file,
    pasted: str | None,
    model: str,
    gold_range: str | None = "",
    low: float = 0.0,
    high: float = 5.0,
    k: int = 20,
) -> tuple[pd.DataFrame, str]:
    """The k pairs of the file with gold score in [low, high] whose predicted rank disagrees most with the gold rank
    (as :func:`mlse.ui.gold_tab.disagreements`); ``line`` is the pair's line in the file."""
    empty = pd.DataFrame(columns=FILE_DISAGREE_COLUMNS)
    request = disagreement_request(low, high, k)
    if isinstance(request, str):
        return empty, request
    table, message = load_rated(file, pasted, gold_range)
    if table is None:
        return empty, message
    try:
        pred = file_predictions(state, table, model)
    except MlseError as exc:
        return empty, md_escape(str(exc))
    s1, s2 = table.role("sentence1"), table.role("sentence2")
    found, listed = disagreement_table(pred, table.gold, s1, s2, *request, name=table.name, index=("line", table.lines))
    return found, listed if not table.n_skipped else f"{message}\n\n{listed}"


# -- the page ---------------------------------------------------------------------------------------------------------
@dataclass
class FileInputs:
    group: object  # the column holding the file widgets (shown when "Your file" is chosen)
    file: object
    pasted: object
    gold_range: object


def build_inputs() -> FileInputs:
    """The upload widgets, hidden until the data source is "Your file" (the example button pastes :data:`EXAMPLE`)."""
    import gradio as gr  # lazy: handlers are tested without gradio

    with gr.Column(visible=False) as group:
        file, pasted, gold_range = upload_with_option(
            "Rated pairs: sentence1, sentence2, score (optional lang1, lang2)",
            "...or paste rows (used when no file is given)",
            "sentence1\tsentence2\tscore\tlang1\tlang2",
            option="Score range (optional)",
            option_placeholder="0:5",
            option_info="Rows whose score lies outside it are skipped and listed.",
            example="Paste the example file",
            example_file=EXAMPLE,
            example_size="sm",
        )
    return FileInputs(group, file, pasted, gold_range)


def wire(state, inputs: FileInputs, models, model, low, high, k, *, outputs, listed, buttons) -> None:
    """Connect the compare and list buttons; the table read by one keeps serving the other while the file, the pasted
    rows and the range stay the same."""
    import gradio as gr  # lazy: handlers are tested without gradio

    run, find = buttons
    kept = gr.State(None)  # (key, UserTable) of the last read

    def read(file, pasted_rows, score_range, held):
        """(the table, or None; the message; the state to keep): the kept table while the inputs are unchanged."""
        key = str(upload_path(file) or ""), pasted_rows or "", score_range or ""
        table, message = load_rated(held[1] if held and held[0] == key else file, pasted_rows, score_range)
        return table, message, ((key, table) if table is not None else None)

    def compare_file_with_gold(
        file, pasted_rows, scorers, score_range, held=None, progress=gr.Progress(track_tqdm=True)
    ):
        table, message, held = read(file, pasted_rows, score_range, held)
        if table is None:
            return *_no_results(), message, held
        return *compare_file(state, table, None, scorers), held

    def list_file_disagreements(
        file,
        pasted_rows,
        scorer,
        score_range,
        gold_from,
        gold_to,
        pairs,
        held=None,
        progress=gr.Progress(track_tqdm=True),
    ):
        table, message, held = read(file, pasted_rows, score_range, held)
        if table is None:
            return pd.DataFrame(columns=FILE_DISAGREE_COLUMNS), message, held
        return *file_disagreements(state, table, None, scorer, "", gold_from, gold_to, pairs), held

    fields = [inputs.file, inputs.pasted]
    run.click(
        compare_file_with_gold,
        [*fields, models, inputs.gold_range, kept],
        [*outputs, kept],
        api_name="compare_file_with_gold",
        concurrency_limit=1,
    )
    find.click(
        list_file_disagreements,
        [*fields, model, inputs.gold_range, low, high, k, kept],
        [*listed, kept],
        api_name="file_disagreements",
        concurrency_limit=1,
    )
