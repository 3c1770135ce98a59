"""Tab 5: fine-tune. Pick a method, models, language pairs, data size and a time budget; watch the run; stop it.

The form becomes a :class:`mlse.train.request.TrainRequest` run by :mod:`mlse.train.jobs` (one background run for the
app) and polled with a ``gr.Timer``; see :mod:`mlse.ui.finetune_methods`, :mod:`mlse.ui.finetune_progress` and
:mod:`mlse.ui.finetune_jobs`."""

from __future__ import annotations

from mlse.errors import MlseError
from mlse.public_mode import FINETUNE_LIMITS, public_mode
from mlse.runs.folders import training_run_name
from mlse.train.config import PRECISIONS
from mlse.train.jobs import training_job
from mlse.train.request import TrainRequest
from mlse.ui.finetune_jobs import new_owner, poll, runner, stop_run
from mlse.ui.finetune_methods import (
    METHOD_LABELS,
    STS_LOSS_LABELS,
    all_pair_choices,
    method_settings,
    training_data_note,
    uses_bitext,
)
from mlse.ui.finetune_progress import progress_html
from mlse.ui.inputs import check_inputs
from mlse.ui.preparing import with_preparing_note
from mlse.ui.text import md_code, md_escape
from mlse.ui.widgets import PAGE_EVENT

POLL_SECONDS = 2.0
MIN_PAIRS, MIN_BUDGET_MINUTES = 100, 0.5  # the smallest job the sliders offer (it must save a run on a fresh cache)
DEFAULTS = TrainRequest.model_construct(method="mse", model="", name="")  # the form's initial values: the defaults


# ------------------------------------------------------------------------------------------------ start and stop
def start_run(
    state,
    method: str,
    model: str,
    teacher: str | None,
    pairs: list[str] | None,
    max_pairs: float | None,
    budget_minutes: float,
    name: str,
    overwrite: bool = False,
    *,
    batch_size: int = DEFAULTS.batch_size,
    lr: float | None = None,
    eval_every: int = DEFAULTS.eval_every_steps,
    max_steps: int | None = None,
    max_epochs: int | None = None,
    dev_max_pairs: int | None = DEFAULTS.dev_max_pairs,
    extend_vocab: int = DEFAULTS.extend_vocab,
    precision: str = DEFAULTS.precision,
    probe: bool = DEFAULTS.probe,
    device: str | None = None,
    sts_loss: str = DEFAULTS.sts_loss,
    sts_weight: float = DEFAULTS.sts_weight,
    owner: str | None = None,
) -> str:
    """Make the run's request from the form and queue it; returns the status message (never raises on bad input). The
    request is validated once (each refusal names the field). ``owner``: the page session's token."""
    jobs = runner(state)
    method, model, teacher, name = (_text(v) for v in (method, model, teacher, name))
    form = dict(
        method=method,
        model=model,
        name=name or (training_run_name(model, method) if model else ""),
        teacher=teacher or None,
        pairs=[p for p in (pairs if isinstance(pairs, list) else [pairs]) if isinstance(p, str) and p.strip()],
        max_pairs=max_pairs,
        budget_minutes=budget_minutes,
        overwrite=bool(overwrite),
        batch_size=batch_size,
        lr=lr,
        eval_every_steps=eval_every,
        max_steps=max_steps,
        max_epochs=max_epochs,
        dev_max_pairs=dev_max_pairs,
        extend_vocab=extend_vocab,
        precision=_text(precision) or DEFAULTS.precision,
        probe=bool(probe),
        device=device,
        backend=state.backend,  # the app's backend runs a head's backbone; fine-tuning trains on torch
        sts_loss=_text(sts_loss) or DEFAULTS.sts_loss,
        sts_weight=sts_weight,
    )
    try:
        req = TrainRequest.model_validate(form, context={"offered": state.model_names})  # the one validation
        fn = training_job(req, child_process=True)  # its memory goes back to the system when it ends
        description = f"{method} on {req.model}, {req.budget_minutes:g} min"
        job = jobs.submit(req.name, fn, description, meta={"request": req}, owner=owner)
    except MlseError as exc:
        return md_escape(str(exc))
    name = req.name
    ahead = [j.name for j in [jobs.running(), *jobs.queued()] if j is not None and j is not job and not j.done]
    if ahead and public_mode():  # another visitor's run: say only that one is busy
        return f"Queued **{md_escape(name)}**. {md_escape(jobs.busy_text(owner))}"
    if ahead:
        return f"Queued **{md_escape(name)}** behind {md_escape(', '.join(ahead))}. {md_escape(jobs.status_text())}"
    started = (
        f"Started **{md_escape(name)}** ({md_escape(description)}); outputs go to `runs/{md_code(name)}`. "
        f"The {req.budget_minutes:g}-minute budget counts training; loading and encoding the data come first, with "
        "their own count below."
    )
    started = with_preparing_note("finetune", started)  # while the app's warm start prepares the models
    return f"{started} {training_data_note(state)}" if uses_bitext(method) else started


def public_note() -> str:
    """The public deployment's limits in words (shown above the form)."""
    limits = ", ".join(f"{label.lower()} at most {limit:g}" for label, (_, limit) in FINETUNE_LIMITS.items())
    return f"on this public deployment no run waits in a queue, none replaces an existing run, and {limits}. "


def slider_max(default: float, label: str, public: bool) -> float:
    """A slider's maximum: the public deployment's limit for that field when lower than the usual maximum."""
    return min(default, FINETUNE_LIMITS[label][1]) if public and label in FINETUNE_LIMITS else default


def _text(value) -> str:
    """A form's text field as a stripped string (an API caller may send a number, a list or nothing)."""
    return value.strip() if isinstance(value, str) else ""


# --------------------------------------------------------------------------------------------------------- layout
def build_tab(state) -> list:
    import gradio as gr  # lazy: importing a tab (its handlers are tested on their own) must not load gradio

    first = method_settings(state, "mse")
    public = public_mode()

    def limited_slider(low: float, high: float, value: float, step: float, label: str):
        """A slider up to ``high``, or to the public deployment's limit for ``label`` when lower."""
        return gr.Slider(low, slider_max(high, label, public), value=value, step=step, label=label)

    with gr.Tab("Fine-tune"):
        gr.Markdown(
            "Train a model here; it is saved under `runs/NAME` and joins the model lists of the other tabs. "
            "One run at a time for the whole app; "
            + (public_note() if public else "a few more may wait in a queue. ")
            + "Uses the GPU when there is one."
        )
        with gr.Row():
            method = gr.Radio([(label, key) for key, label in METHOD_LABELS.items()], value="mse", label="Method")
        note = gr.Markdown(first["note"])
        with gr.Row():
            model = gr.Dropdown(
                first["models"],
                value=first["model"],
                label="Student / backbone / Stage-1 scorer",
                allow_custom_value=True,
            )
            teacher = gr.Dropdown(
                first["teachers"],
                value=first["teacher"],
                label="Teacher",
                allow_custom_value=True,
                visible=first["teacher_visible"],
            )
        pairs = gr.CheckboxGroup(first["pairs"], value=first["pairs_value"], label="Language pairs")
        with gr.Row():
            sts_loss = gr.Radio(
                [(label, key) for key, label in STS_LOSS_LABELS.items()],
                value=first["sts_loss"],
                label="STS loss on scored pairs (STS Multi MT train)",
                visible=first["sts_visible"],
            )
            sts_weight = gr.Number(
                DEFAULTS.sts_weight,
                label="STS term weight beside the method's loss",
                visible=first["sts_weight_visible"],
            )
        with gr.Row():
            max_pairs = limited_slider(MIN_PAIRS, 20000, DEFAULTS.max_pairs, 100, "Max pairs per language pair")
            budget = limited_slider(MIN_BUDGET_MINUTES, 60, DEFAULTS.budget_minutes, 0.5, "Time budget (minutes)")
        with gr.Row():
            name = gr.Textbox(first["name"], label="Run name (folder under runs/)", max_lines=1)
            overwrite = gr.Checkbox(False, label="Overwrite an existing run of that name")
        with gr.Accordion("Advanced", open=False):
            with gr.Row():
                batch_size = limited_slider(4, 256, DEFAULTS.batch_size, 4, "Batch size")
                lr = gr.Number(None, label="Learning rate (empty: the method's default)")
                eval_every = gr.Slider(
                    1, 500, value=DEFAULTS.eval_every_steps, step=1, label="Evaluate on dev every N steps"
                )
            with gr.Row():
                max_steps = gr.Number(None, label="Max steps (fine-tuning; empty: budget only)", precision=0)
                max_epochs = gr.Number(None, label="Max epochs (Stage 1/2; empty: default)", precision=0)
                dev_max_pairs = gr.Number(
                    DEFAULTS.dev_max_pairs, label="Dev rows per dev pair (empty: all)", precision=0
                )
            with gr.Row():
                extend_vocab = gr.Number(
                    DEFAULTS.extend_vocab, label="Extend vocabulary by N pieces (0: off)", precision=0
                )
                precision = gr.Radio(list(PRECISIONS), value=DEFAULTS.precision, label="Precision")
                probe = gr.Checkbox(DEFAULTS.probe, label="Stage 1: language-ID probe after training")
        with gr.Row():
            start = gr.Button("Start", variant="primary")
            stop = gr.Button("Stop", variant="stop")
        first_status = runner(state).busy_text(None) if public else runner(state).status_text()
        status = gr.Markdown(md_escape(first_status))
        progress = gr.HTML(progress_html(0.0, "no run yet"))
        x_axis = gr.Radio(["step", "minutes"], value="step", label="x axis")
        with gr.Row():
            loss_plot = gr.Plot(label="Loss")
            dev_plot = gr.Plot(label="Dev score")
        seen = gr.State(None)
        owner = gr.State(None)  # this page session's owner token, made at its first Start (new_owner)
        timer = gr.Timer(POLL_SECONDS)

        def on_method(m, current_sts_loss):
            s = method_settings(state, m, current_sts_loss)
            return (
                gr.update(choices=s["models"], value=s["model"]),
                gr.update(choices=s["teachers"], value=s["teacher"], visible=s["teacher_visible"]),
                gr.update(choices=s["pairs"], value=s["pairs_value"], visible=s["pairs_visible"]),
                gr.update(visible=s["max_pairs_visible"]),
                gr.update(value=s["sts_loss"], visible=s["sts_visible"]),
                gr.update(visible=s["sts_weight_visible"]),
                s["note"],
                s["name"],
            )

        # the API's parameter names (gradio_client callers pass them by name): the form's labels, as words
        def on_start(
            method,
            model,
            teacher,
            language_pairs,
            max_pairs,
            budget_minutes,
            run_name,
            overwrite,
            batch_size,
            learning_rate,
            eval_every_steps,
            max_steps,
            max_epochs,
            dev_max_pairs,
            extend_vocab,
            precision,
            language_probe,
            sts_loss,
            sts_weight,
            token,
        ):
            token = token or new_owner()
            form = (method, model, teacher, language_pairs, max_pairs, budget_minutes, run_name, overwrite)
            message = start_run(
                state,
                *form,
                batch_size=batch_size,
                lr=learning_rate,
                eval_every=eval_every_steps,
                max_steps=max_steps,
                max_epochs=max_epochs,
                dev_max_pairs=dev_max_pairs,
                extend_vocab=extend_vocab,
                precision=precision,
                probe=language_probe,
                sts_loss=sts_loss,
                sts_weight=sts_weight,
                owner=token,
            )
            return message, token

        def on_tick(axis, last, token):
            text, bar, loss, dev, version = poll(state, axis, token)
            if version == last:
                return text, bar, gr.skip(), gr.skip(), last
            return text, bar, loss, dev, version

        method.change(
            on_method,
            [method, sts_loss],
            [model, teacher, pairs, max_pairs, sts_loss, sts_weight, note, name],
            **PAGE_EVENT,
        )
        form = [method, model, teacher, pairs, max_pairs, budget, name, overwrite, batch_size, lr, eval_every]
        form += [max_steps, max_epochs, dev_max_pairs, extend_vocab, precision, probe, sts_loss, sts_weight]
        start.click(on_start, [*form, owner], [status, owner], api_name="finetune_start", concurrency_limit=4)
        stop.click(lambda token: stop_run(state, token), owner, status, api_name="finetune_stop", concurrency_limit=4)
        outputs = [status, progress, loss_plot, dev_plot, seen]
        poll_inputs = [x_axis, seen, owner]
        for event in (timer.tick, x_axis.change):
            event(
                on_tick, poll_inputs, outputs, concurrency_limit=None, show_progress="hidden", api_visibility="private"
            )
        check_inputs(*(c for c in form if c is not pairs))  # numbers and choices refused naming the field
        check_inputs(pairs, allowed=all_pair_choices)  # the page shows one method's pairs; the API may ask another's
    return []  # no model picker the app refreshes (the method change refreshes this tab's own)
