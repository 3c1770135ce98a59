"""Tab 6: results. Every evaluation and experiment run so far (seed grid and fine-tuning included) as one sortable
table with filters, and plots: a metric per model, the seed grid's per-pair gains, and the fine-tuning curves.

The table comes from :mod:`mlse.runs.results_index`; the browser is slow to draw thousands of rows, so it shows at
most :data:`MAX_TABLE_ROWS` rows, averages first, and the plots wait in a second inner tab.
"""

from __future__ import annotations

import re
from pathlib import Path

from mlse.runs.results_index import build_index, finetune_curves
from mlse.ui.results_rated import rated_split, split_shown
from mlse.ui.tables import number_text, significant_text, sortable
from mlse.ui.text import md_escape
from mlse.ui.widgets import PAGE_EVENT, read_only_table

ALL = "(all)"
# The number right after what it measures (model, metric), so a narrow window shows it without scrolling
TABLE_COLUMNS = ["model", "metric", "value", "task", "key", "split", "kind", "experiment", "date", "source"]
MAX_TABLE_ROWS = 200  # rows sent to the browser: it lays out every one
DEFAULT_METRICS = {
    "sts": "spearman",
    "tatoeba": "acc_mean",
    "mining": "f1",
    "finetune": "best_dev_spearman",
    "training": "stage2_dev_pearson",
}


def load_index(roots: list[str | Path] | None = None):
    """(the full table, a markdown line saying how many rows / files, which runs were interrupted and which files
    were skipped)."""
    frame, warnings = build_index(roots)
    note = f"{len(frame)} numbers from {frame['source'].nunique()} result files."
    interrupted = sorted(set(frame.loc[frame["kind"] == "interrupted-run", "model"]))
    if interrupted:
        note += (
            f" Interrupted (their job ended with the app; each keeps its last checkpoint, not a finished model): "
            f"{md_escape(', '.join(interrupted))}."
        )
    if warnings:
        shown = "; ".join(md_escape(w) for w in warnings[:5])
        note += f" Skipped {len(warnings)} file(s): {shown}" + (" ..." if len(warnings) > 5 else "")
    return frame, note


def choices(frame) -> dict[str, list[str]]:
    """Filter choices present in the table: tasks, models, metrics (each led by ALL)."""
    return {f"{c}s": [ALL, *sorted({str(v) for v in frame[c].dropna() if str(v)})] for c in ("task", "model", "metric")}


def filter_table(
    frame, task: str | None = ALL, model: str | None = ALL, metric: str | None = ALL, text: str | None = ""
):
    """Rows of one task / model / metric (ALL or empty: no filter) whose key or source contains ``text``."""
    out = frame
    for column, value in (("task", task), ("model", model), ("metric", metric)):
        if value and value != ALL:
            out = out[out[column] == value]
    text = (text or "").strip().lower()
    if text:
        hay = (out["key"].astype(str) + " " + out["source"].astype(str)).str.lower()
        out = out[hay.str.contains(text, regex=False)]
    out = out[TABLE_COLUMNS].reset_index(drop=True)
    return out.assign(value=out["value"].map(display_number))


def table_view(
    frame,
    task: str | None = ALL,
    model: str | None = ALL,
    metric: str | None = ALL,
    text: str | None = "",
    limit: int = MAX_TABLE_ROWS,
):
    """(the rows the table shows, its label): the filtered rows, averages and run-level numbers first (per pair and
    per language after them), at most ``limit``; the label says how many matched when some are left out."""
    rows = filter_table(frame, task, model, metric, text)
    summary = rows["key"].astype(str).str.startswith("avg:") | (rows["key"].astype(str) == "")
    rows = rows.iloc[(~summary).to_numpy().argsort(kind="stable")].reset_index(drop=True)
    if len(rows) <= limit:
        return rows, f"Results ({len(rows)} rows)"
    return rows.head(limit), f"Results: the first {limit} of {len(rows)} rows (narrow them with the filters above)"


# metrics that count (steps, epochs, rows, workers): shown as whole numbers, "40", not "40.00"
_COUNT = re.compile(r"(^|[._])(steps?|epochs?|rows|seen|world_size)$")


def shown(rows):
    """The rows of :func:`table_view` as the table shows them: each value by :func:`mlse.ui.tables.significant_text`,
    a count (steps, epochs, rows...) as a whole number; still sorted as a number."""
    styled = sortable(rows, {"value": significant_text})
    counts = rows.index[[bool(_COUNT.search(str(m))) for m in rows["metric"]]] if "metric" in rows else []
    if len(counts):
        styled = styled.format(lambda v: number_text(v, 0) or significant_text(v), subset=(counts, ["value"]))
    return styled


def display_number(value):
    """A number as the table holds it: :func:`mlse.ui.tables.significant_text` of it (52.09125 -> 52.09, 0.00123 ->
    0.0012 instead of 0) as a number. Non-numbers pass through."""
    text = significant_text(value)
    return float(text) if text and text != value else value


def refresh(task: str = ALL, model: str = ALL, metric: str = ALL, text: str = "", roots=None):
    """Re-scan the files: (the table's rows and label as :func:`table_view`, choices, note, full table)."""
    frame, note = load_index(roots)
    return table_view(frame, task, model, metric, text), choices(frame), note, frame


def plot_options(frame, task: str | None) -> dict:
    """Keys and metrics that exist for ``task``, with sensible defaults (``avg:all``, the task's usual metric)."""
    rows = frame[frame["task"] == task]
    keys = sorted({str(k) for k in rows["key"]})
    metrics = sorted(set(rows["metric"]))
    key = "avg:all" if "avg:all" in keys else (keys[0] if keys else "")
    metric = DEFAULT_METRICS.get(task or "")
    metric = metric if metric in metrics else (metrics[0] if metrics else None)
    return {"keys": keys, "key": key, "metrics": metrics, "metric": metric}


def _layout(fig, title: str, bottom: int, height: int = 420, **options):
    """``fig`` with the title, height and margins every plot here has (``bottom``: pixels for the x labels)."""
    fig.update_layout(title=title, height=height, margin=dict(l=40, r=10, t=50, b=bottom), **options)
    return fig


def metric_plot(frame, task: str, key: str | None, metric: str | None):
    """Bar chart of ``metric`` for every model on ``task`` / ``key`` (e.g. sts / avg:all / spearman)."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    metric = metric or DEFAULT_METRICS.get(task, "")
    rows = frame[(frame["task"] == task) & (frame["metric"] == metric)]
    if key:
        rows = rows[rows["key"] == key]
    if rows.empty:
        return go.Figure(layout={"title": f"No {metric or 'metric'} for {task} {key or ''} yet", "height": 380})
    rows = rows.sort_values("value", ascending=False)
    text = [f"{v:.1f}" for v in rows["value"]]
    dup = rows["model"].duplicated(keep=False)  # a model in several files: its experiment folder added to its name
    labels = [f"{m} ({Path(e).name})" if d else m for m, e, d in zip(rows["model"], rows["experiment"], dup)]
    fig = go.Figure(go.Bar(x=labels, y=rows["value"], text=text, hovertext=rows["source"], textposition="outside"))
    return _layout(fig, f"{task} {key or ''}: {metric} per model", 120, yaxis_title=metric, xaxis_tickangle=-30)


def seed_grid_plot(frame, metric: str = "relative_pearson"):
    """Grouped bars: each seed-grid variant's ``metric`` per STS pair (default: Pearson gain over the baseline)."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    rows = frame[(frame["kind"] == "seed-grid") & (frame["metric"] == metric) & (frame["task"] == "sts")]
    rows = rows[~rows["key"].str.startswith("avg:")]
    experiments = sorted(rows["experiment"].unique())
    if not experiments:
        return go.Figure(
            layout={"title": "No seed-grid results yet (python -m mlse experiment seed-grid)", "height": 380}
        )
    fig = go.Figure()
    experiment = experiments[0]
    rows = rows[rows["experiment"] == experiment]
    for model, group in rows.groupby("model", sort=False):
        fig.add_trace(go.Bar(name=model, x=group["key"], y=group["value"]))
    title = f"Seed grid ({Path(experiment).name}): {metric} per pair"
    return _layout(fig, title, 60, barmode="group", yaxis_title=metric)


MIN_LANGS_FOR_LANGUAGE_PLOT = 30  # a Tatoeba result over this many languages is a "many languages" run (all 112)


def tatoeba_languages_plot(frame, metric: str = "acc_mean"):
    """Tatoeba ``metric`` per language for every result file over many languages (``baseline.py --tatoeba-all``):
    one trace per file, languages sorted by their mean over the files."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    rows = frame[(frame["task"] == "tatoeba") & (frame["metric"] == metric) & (frame["kind"] == "eval")]
    rows = rows[~rows["key"].str.startswith("avg:")]
    sizes = rows.groupby("source")["key"].nunique()
    rows = rows[rows["source"].isin(sizes[sizes >= MIN_LANGS_FOR_LANGUAGE_PLOT].index)]
    if rows.empty:
        title = "No Tatoeba result over many languages yet (python -m benchmarks.baseline --tatoeba-all)"
        return go.Figure(layout={"title": title, "height": 380})
    fig = go.Figure()
    order = rows.groupby("key")["value"].mean().sort_values(ascending=False).index.tolist()
    for source, group in rows.groupby("source", sort=True):
        values = group.set_index("key")["value"].reindex(order)
        label = f"{group['model'].iloc[0]} ({Path(source).stem})"
        fig.add_trace(go.Scatter(x=order, y=values, mode="markers+lines", name=label))
    title = f"Tatoeba over {len(order)} languages: {metric} (sorted by the mean over models)"
    return _layout(fig, title, 80, height=440, yaxis_title=metric, xaxis_tickangle=-90, xaxis_tickfont_size=8)


def curves_plot(roots=None):
    """Dev Spearman vs minutes of every fine-tuning run (run logs and comparison files)."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    curves = finetune_curves(roots)
    fig = go.Figure()
    for run, group in curves.groupby("run", sort=True):
        fig.add_trace(go.Scatter(x=group["minutes"], y=group["dev_spearman"], mode="lines+markers", name=run))
    title = "Fine-tuning: dev Spearman vs minutes" if len(curves) else "No fine-tuning runs yet"
    return _layout(fig, title, 40, xaxis_title="minutes", yaxis_title="dev Spearman x100")


def build_tab(state) -> list:
    import gradio as gr  # lazy: importing the ui modules (handlers tested on their own) must not load gradio

    frame, note = load_index()
    found = choices(frame)
    tasks = found["tasks"][1:]
    first_task = "sts" if "sts" in tasks else (tasks[0] if tasks else None)
    with gr.Tab("Results"):
        gr.Markdown(
            "Every result file under `results/` and every trained run under `runs/`, one number per row. "
            "Click a column header to sort; the filters search every row."
        )
        with gr.Row():
            task = gr.Dropdown(found["tasks"], value=ALL, label="Task")
            model = gr.Dropdown(found["models"], value=ALL, label="Model")
            metric = gr.Dropdown(found["metrics"], value=ALL, label="Metric")
            text = gr.Textbox(label="Key / file contains", max_lines=1)
            refresh_button = gr.Button("Refresh")
        status = gr.Markdown(note, elem_id="results-status")
        rows, label = table_view(frame)
        options = plot_options(frame, first_task)
        # Two inner tabs: the browser draws a tab's content when first opened, so the slow plots wait until asked for.
        with gr.Tabs():
            with gr.Tab("Table"):
                # no in-table search box: it would search the shown rows only; the filters above search them all
                table = read_only_table(shown(rows), label=label, max_height=420, elem_id="results-table")
                split_rows, split_note = rated_split(frame)  # the leave-languages-out protocol's gap on screen
                split_status = gr.Markdown(split_note)
                split_table = read_only_table(
                    split_shown(split_rows), label="Rated / unrated languages", max_height=300
                )
            with gr.Tab("Plots"):
                with gr.Row():
                    plot_task = gr.Dropdown(tasks, value=first_task, label="Plot: task")
                    plot_key = gr.Dropdown(
                        options["keys"],
                        value=options["key"],
                        allow_custom_value=True,
                        label="Plot: pair / language / average",
                    )
                    plot_metric = gr.Dropdown(
                        options["metrics"], value=options["metric"], label="Plot: metric", allow_custom_value=True
                    )
                bar = gr.Plot(metric_plot(frame, first_task, options["key"], options["metric"]) if first_task else None)
                with gr.Row():
                    grid = gr.Plot(seed_grid_plot(frame))
                    curve = gr.Plot(curves_plot())
                languages = gr.Plot(tatoeba_languages_plot(frame))

        def on_filter(t, m, me, tx):
            full, _ = load_index()
            rows_now, label_now = table_view(full, t, m, me, tx)
            return gr.update(value=shown(rows_now), label=label_now)

        def on_refresh(task, model, metric, key_contains, plot_task, plot_key, plot_metric):
            (rows_now, label_now), found_now, note_now, full = refresh(task, model, metric, key_contains)
            split_now, split_note_now = rated_split(full)
            return (
                gr.update(value=shown(rows_now), label=label_now),
                note_now,
                *(gr.update(choices=offered) for offered in found_now.values()),  # task, model, metric
                metric_plot(full, plot_task, plot_key, plot_metric),
                seed_grid_plot(full),
                curves_plot(),
                tatoeba_languages_plot(full),
                split_shown(split_now),
                split_note_now,
            )

        def on_plot(pt, pk, pm):
            full, _ = load_index()
            return metric_plot(full, pt, pk, pm)

        def on_plot_task(pt):
            full, _ = load_index()
            o = plot_options(full, pt)
            return (
                gr.update(choices=o["keys"], value=o["key"]),
                gr.update(choices=o["metrics"], value=o["metric"]),
                metric_plot(full, pt, o["key"], o["metric"]),
            )

        filters = [task, model, metric, text]
        for control in (task, model, metric):
            control.change(on_filter, filters, table, **PAGE_EVENT)
        text.submit(on_filter, filters, table, **PAGE_EVENT)
        refresh_button.click(
            on_refresh,
            [*filters, plot_task, plot_key, plot_metric],
            [table, status, task, model, metric, bar, grid, curve, languages, split_table, split_status],
            api_name="results_refresh",
            concurrency_limit=2,
        )
        plot_task.input(on_plot_task, plot_task, [plot_key, plot_metric, bar], **PAGE_EVENT)
        for control in (plot_key, plot_metric):
            control.input(on_plot, [plot_task, plot_key, plot_metric], bar, **PAGE_EVENT)
    return []  # no model picker
