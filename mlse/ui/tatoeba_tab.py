"""Tab 3: Tatoeba retrieval errors of one scorer, the neighbourhood of one query, and two scorers compared, on a LASER
Tatoeba language or on the user's own bitext.

``source`` is a Tatoeba language code or a user's ParallelCorpus, both scored as one memoised TatoebaLanguage
(:mod:`mlse.ui.tatoeba_views`). No ``from __future__ import annotations``: gradio must see the real
``gr.SelectData`` class on the select handler.
"""

import pandas as pd

from mlse.analysis.retrieval_errors import compare_errors, query_neighbours
from mlse.data.types import ParallelCorpus
from mlse.errors import MlseError
from mlse.evaluation.bitext_view import bitext_notes
from mlse.evaluation.runners import DIRECTIONS, TatoebaLanguage
from mlse.ui.explain_sections import build_error_section
from mlse.ui.explain_view import row_cells
from mlse.ui.inputs import check_inputs
from mlse.ui.model_pickers import ModelPicker
from mlse.ui.preparing import with_preparing_note
from mlse.ui.tables import headers, numbers_as_text
from mlse.ui.tatoeba_upload import EXAMPLE, direction_labels, read_bitext
from mlse.ui.tatoeba_views import MARGIN_K, languages, source_view
from mlse.ui.text import md_escape
from mlse.ui.widgets import read_only_table, show_for_choice, upload_with_option

DEFAULT_LANG = "deu"
DATA_CHOICES = ("Tatoeba", "Your bitext")
NO_BITEXT = "Read your bitext first: upload a file or paste rows, then press *Show errors on my bitext*."
CRITERIA = ("cosine", "margin")  # nearest neighbour by cosine, or best ratio margin among the cosine shortlist
N_NEIGHBOURS = 10
DECIMALS = 3  # similarities and margins: an error's retrieved and gold cosines often differ in the third decimal
SCORE_FIELDS = ("sim_retrieved", "sim_gold", "margin_retrieved", "margin_gold")

# An error's fields in table order: which row, the scores, then the sentences (long ones would push scores off-screen)
SENTENCE_FIELDS = ("query", "retrieved", "gold")
ERROR_FIELDS = ["direction", "index", *SCORE_FIELDS, "rank_of_gold", *SENTENCE_FIELDS]
ERROR_COLUMNS = headers(ERROR_FIELDS)  # direction, row, cosine retrieved, ..., rank of gold, query, retrieved, gold
ERROR_TYPES = ["str", "number", *["str"] * len(SCORE_FIELDS), "number", *["str"] * len(SENTENCE_FIELDS)]
NEIGHBOUR_COLUMNS = ["rank", "cosine", "margin", "note", "sentence"]  # likewise: the scores before the sentence
NEIGHBOUR_TYPES = ["number", "str", "str", "str", "str"]
COMPARE_FIELDS = ["change", "direction", "index", "query", "gold", "retrieved_a", "retrieved_b"]
COMPARE_COLUMNS = headers(COMPARE_FIELDS)  # ..., row, ..., retrieved by A, retrieved by B
COMPARE_TYPES = ["str", "str", "number", "str", "str", "str", "str"]


def _labels(source) -> dict[str, str]:
    """direction -> its name in the tables: to_en / from_en for Tatoeba, "en→de" / "de→en" for a bitext."""
    return direction_labels(source) if isinstance(source, ParallelCorpus) else {d: d for d in DIRECTIONS}


def _sides(source, view: TatoebaLanguage) -> tuple[str, str, str, dict[str, str]]:
    """(title, source side, target side, direction -> label) as the page's markdown names them (escaped)."""
    if isinstance(source, ParallelCorpus):
        src, tgt = md_escape(source.src_lang), md_escape(source.tgt_lang)
        labels = {d: md_escape(label) for d, label in _labels(source).items()}
        return f"your bitext **{md_escape(source.name)}**", src, tgt, labels
    return f"Tatoeba **{view.lang}**", view.lang, "English", _labels(source)  # plain codes, "to_en" as written


def _summary(source, view: TatoebaLanguage, model: str, criterion: str, n_errors: dict[str, int]) -> str:
    m = view.metrics
    title, src, tgt, label = _sides(source, view)
    rows = [
        f"| {label[d]}: {a} queries {b} | {m[f'acc_{d}']:.1f} | {m[f'acc_{d}_margin']:.1f} | {n_errors[d]} |"
        for d, a, b in (("to_en", src, tgt), ("from_en", tgt, src))
    ]
    table = ["| direction | accuracy (cosine) | accuracy (margin) | errors listed |", "|---|---|---|---|", *rows]
    table.append(f"| mean | {m['acc_mean']:.1f} | {m['acc_mean_margin']:.1f} | |")
    return "\n\n".join(
        [
            f"**{md_escape(model)}** on {title} ({len(view.src)} pairs); errors listed under the **{criterion}** "
            "criterion.",
            "\n".join(table),
            f"xSIM error ({src} as source, ratio margin): {m['xsim_error']:.1f}%. Select a row for its neighbours.",
        ]
    )


def retrieval(state, source, model: str, criterion: str = "cosine") -> tuple[str, pd.DataFrame]:
    """Accuracy both ways and every wrongly retrieved query of ``source`` -> (summary markdown, errors table)."""
    empty = pd.DataFrame(columns=ERROR_COLUMNS)
    try:
        view = source_view(state, source, model)
        errors = view.errors(criterion)
    except MlseError as exc:
        return md_escape(str(exc)), empty
    label = _labels(source)
    rows = [{"direction": label[d], **e} for d in DIRECTIONS for e in errors[d]]
    scores = dict.fromkeys(SCORE_FIELDS, DECIMALS)
    table = numbers_as_text(pd.DataFrame(rows, columns=ERROR_FIELDS), scores).set_axis(ERROR_COLUMNS, axis=1)
    summary = _summary(source, view, model, criterion, {d: len(errors[d]) for d in DIRECTIONS})
    return with_preparing_note("tatoeba", summary), table  # while the app's warm start still runs


def _parse_row(row, labels: dict[str, str] | None = None) -> tuple[str, int]:
    """(direction, index) from an errors-table row: a dict, a list in ERROR_COLUMNS order, or a pandas Series.
    ``labels``: direction -> the name the table shows (a bitext's "en->de")."""
    if row is None or (isinstance(row, (list, tuple)) and len(row) < 2):
        raise MlseError("Select a row of the errors table.")
    cells = row_cells(row, ERROR_COLUMNS)  # a list starts as a table row does (ERROR_FIELDS), short or not
    if not cells:  # a single value (an API caller's guess at the format)
        raise MlseError(f"not an errors-table row: {str(row)[:80]!r}; expected [direction, index, ...]")
    direction, index = cells.get("direction"), cells.get(ERROR_COLUMNS[1], cells.get("index"))
    direction = {shown: d for d, shown in (labels or {}).items()}.get(direction, direction)
    if direction not in DIRECTIONS:
        raise MlseError(f"not an errors-table row: direction {direction!r}")
    try:
        return direction, int(index)
    except (TypeError, ValueError):
        raise MlseError(f"not an errors-table row: index {index!r}") from None


def details(state, source, model: str, row, k: int = N_NEIGHBOURS) -> tuple[str, pd.DataFrame]:
    """One query's gold and its k nearest neighbours (cosine and ratio margin) -> (markdown, neighbours table)."""
    empty = pd.DataFrame(columns=NEIGHBOUR_COLUMNS)
    try:
        direction, index = _parse_row(row, _labels(source))
        view = source_view(state, source, model)
        if not 0 <= index < len(view.src):
            raise MlseError(f"query index {index} is out of range for {view.lang} ({len(view.src)} pairs)")
    except MlseError as exc:
        return md_escape(str(exc)), empty
    q_emb, b_emb, q_texts, b_texts = (
        (view.src_emb, view.tgt_emb, view.src, view.tgt)
        if direction == "to_en"
        else (view.tgt_emb, view.src_emb, view.tgt, view.src)
    )
    nn = query_neighbours(q_emb, b_emb, index, k=int(k), margin_k=MARGIN_K)
    rows = []
    for rank, (j, cos, marg) in enumerate(zip(nn["ids"], nn["cosine"], nn["margin"]), start=1):
        rows.append([rank, f"{cos:.{DECIMALS}f}", f"{marg:.{DECIMALS}f}", "gold" if j == index else "", b_texts[j]])
    text = "\n\n".join(
        [
            f"**Query** ({_sides(source, view)[3][direction]}, #{index}): {md_escape(q_texts[index])}",
            f"**Gold translation**: {md_escape(b_texts[index])}",
            f"Gold: cosine {nn['gold_cosine']:.4f} (rank {nn['gold_rank_cosine']}), "
            f"ratio margin {nn['gold_margin']:.4f} (rank {nn['gold_rank_margin']}) among {len(b_texts)} candidates.",
        ]
    )
    return text, pd.DataFrame(rows, columns=NEIGHBOUR_COLUMNS)


def compare(state, source, model_a: str, model_b: str, criterion: str = "cosine") -> tuple[str, pd.DataFrame]:
    """Queries model B retrieves correctly and A not (fixed by B), and the reverse (broken by B)."""
    empty = pd.DataFrame(columns=COMPARE_COLUMNS)
    try:
        view_a = source_view(state, source, model_a)
        view_b = source_view(state, source, model_b)
        rows, counts = compare_errors(view_a.errors(criterion), view_b.errors(criterion))
    except MlseError as exc:
        return md_escape(str(exc)), empty
    ma, mb = view_a.metrics, view_b.metrics
    key = "acc_mean" if criterion == "cosine" else "acc_mean_margin"
    title, label = _sides(source, view_a)[0], _labels(source)
    rows = [[{**r, "direction": label[r["direction"]]}[f] for f in COMPARE_FIELDS] for r in rows]
    text = (
        f"{title[0].upper()}{title[1:]}, {criterion} criterion. A = **{md_escape(model_a)}** (mean accuracy "
        f"{ma[key]:.1f}), B = **{md_escape(model_b)}** ({mb[key]:.1f}). Fixed by B: **{counts['fixed']}**, "
        f"broken by B: **{counts['broken']}**, wrong under both: {counts['both_wrong']} (queries, both directions)."
    )
    return text, pd.DataFrame(rows, columns=COMPARE_COLUMNS) if rows else empty


def bitext_retrieval(
    state, file, pasted: str | None, model: str, criterion: str = "cosine", columns: str | None = ""
) -> tuple[str, pd.DataFrame, ParallelCorpus | None]:
    """The user's bitext (an upload, else pasted rows; ``columns`` picks two of more) scored like a Tatoeba language
    -> (message and summary, errors table, the corpus to hold, or None)."""
    corpus, message = read_bitext(file, pasted, columns)
    if corpus is None:
        return message, pd.DataFrame(columns=ERROR_COLUMNS), None
    text, table = retrieval(state, corpus, model, criterion)
    return "\n\n".join([message, text, *(md_escape(n) for n in bitext_notes(corpus))]), table, corpus


def bitext_compare(state, corpus, model_a: str, model_b: str, criterion: str = "cosine") -> tuple[str, pd.DataFrame]:
    """:func:`compare` on the bitext held from :func:`bitext_retrieval`."""
    if not isinstance(corpus, ParallelCorpus):
        return NO_BITEXT, pd.DataFrame(columns=COMPARE_COLUMNS)
    return compare(state, corpus, model_a, model_b, criterion)


def build_tab(state) -> list[ModelPicker]:
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    langs = languages(state)
    names = state.model_names()
    preferred = state.preferred_model()  # me5-small on a full install
    with gr.Tab("Tatoeba errors"):
        data = gr.Radio(
            list(DATA_CHOICES),
            value=DATA_CHOICES[0],
            label="Data",
            info="A LASER Tatoeba language paired with English, or your own aligned sentences",
        )
        with gr.Column(visible=True) as tatoeba_inputs:
            if not langs:
                gr.Markdown("No Tatoeba data found: set MLSE_DATA to the data directory (it needs tatoeba_laser_v1/).")
            lang = gr.Dropdown(
                langs,
                value=DEFAULT_LANG if DEFAULT_LANG in langs else (langs or [None])[0],
                label="Language (paired with English)",
            )
        with gr.Column(visible=False) as bitext_inputs:
            file, pasted, columns = upload_with_option(
                "Bitext: two aligned columns, header of language codes optional (en, de)",
                "...or paste rows: source TAB target (used when no file is given)",
                "en\tde\nIt is raining.\tEs regnet.",
                option="Columns (optional)",
                option_placeholder="en, fr  or  1 3",
                option_info="Two of the file's language columns, when it has more; the first two by default.",
                example="Paste the example",
                example_file=EXAMPLE,
            )
        with gr.Row():
            model = gr.Dropdown(names, value=preferred, label="Scorer")
            criterion = gr.Radio(list(CRITERIA), value="cosine", label="Retrieval criterion")
            run = gr.Button("Show errors", variant="primary")
            run_bitext = gr.Button("Show errors on my bitext", variant="primary", visible=False)
        summary = gr.Markdown(latex_delimiters=[])  # sentences are shown literally: no "$$...$$" as LaTeX
        table = read_only_table(
            headers=ERROR_COLUMNS,
            datatype=ERROR_TYPES,
            label="Errors (select a row; a click on a sentence shows all of it)",
        )
        shown = gr.State(None)  # (source, model) the table was computed for, so a later dropdown change is harmless
        held = gr.State(None)  # the user's bitext as last read: an upload is deleted once read in public mode
        detail_md = gr.Markdown(latex_delimiters=[])
        neighbours = read_only_table(headers=NEIGHBOUR_COLUMNS, datatype=NEIGHBOUR_TYPES, label="Nearest neighbours")
        build_error_section(state, table, shown, ERROR_COLUMNS)  # the selected error explained, side by side
        with gr.Accordion("Compare two scorers", open=False):
            with gr.Row():
                model_a = gr.Dropdown(names, value=preferred, label="Scorer A")
                model_b = gr.Dropdown(names, value=names[-1] if names else None, label="Scorer B")
                cmp_button = gr.Button("Compare")
                cmp_bitext = gr.Button("Compare on my bitext", visible=False)
            cmp_md = gr.Markdown(latex_delimiters=[])
            cmp_table = read_only_table(headers=COMPARE_COLUMNS, datatype=COMPARE_TYPES)

        def on_run(language, scorer, retrieval_criterion, progress=gr.Progress(track_tqdm=True)):
            text, df = retrieval(state, language, scorer, retrieval_criterion)
            return text, df, (language, scorer)

        def on_run_bitext(
            bitext_file,
            pasted_rows,
            language_columns,
            scorer,
            retrieval_criterion,
            progress=gr.Progress(track_tqdm=True),
        ):
            text, df, corpus = bitext_retrieval(
                state, bitext_file, pasted_rows, scorer, retrieval_criterion, language_columns
            )
            return text, df, (corpus, scorer) if corpus is not None else None, corpus

        def on_select(shown_, evt: gr.SelectData):
            if not shown_:
                return "Show the errors first.", pd.DataFrame(columns=NEIGHBOUR_COLUMNS)
            return details(state, shown_[0], shown_[1], evt.row_value)

        def on_compare(language, scorer_a, scorer_b, retrieval_criterion, progress=gr.Progress(track_tqdm=True)):
            return compare(state, language, scorer_a, scorer_b, retrieval_criterion)

        def on_compare_bitext(bitext, scorer_a, scorer_b, retrieval_criterion, progress=gr.Progress(track_tqdm=True)):
            return bitext_compare(state, bitext, scorer_a, scorer_b, retrieval_criterion)

        show_for_choice(
            data, DATA_CHOICES[1], [tatoeba_inputs, run, cmp_button], [bitext_inputs, run_bitext, cmp_bitext]
        )
        run.click(
            on_run, [lang, model, criterion], [summary, table, shown], api_name="tatoeba_errors", concurrency_limit=1
        )
        run_bitext.click(
            on_run_bitext,
            [file, pasted, columns, model, criterion],
            [summary, table, shown, held],
            api_name="tatoeba_bitext_errors",
            concurrency_limit=1,
        )
        table.select(on_select, [shown], [detail_md, neighbours], concurrency_limit=2, api_visibility="private")
        for button, handler, source, api in (
            (cmp_button, on_compare, lang, "tatoeba_compare"),
            (cmp_bitext, on_compare_bitext, held, "tatoeba_bitext_compare"),
        ):  # two scorers compared on a Tatoeba language, or on the bitext last read
            button.click(
                handler, [source, model_a, model_b, criterion], [cmp_md, cmp_table], api_name=api, concurrency_limit=1
            )
        check_inputs(data, lang, criterion)
        check_inputs(model, model_a, model_b, allowed=state.model_names)
    return [ModelPicker(model), ModelPicker(model_a), ModelPicker(model_b)]
