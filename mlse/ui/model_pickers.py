"""Keep every tab's model picker in step with the app's model list.

A run trained while the app is up joins the pickers without a restart: the app polls ``AppState.version`` (bumped by a
rescan that changes the list) and updates a page's pickers, keeping what the user selected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

POLL_SECONDS = 5.0  # the fine-tune tab's poll is 2 s; a new model may take a little longer to show up elsewhere


@dataclass
class ModelPicker:
    component: Any  # a gr.Dropdown or gr.CheckboxGroup whose values are model names
    multi: bool = False  # several models ticked (CheckboxGroup) rather than one chosen
    labelled: bool = False  # choices are (label, name) pairs (the score tab shows each model's kind)
    scorers_only: bool = False  # only backbone + heads scorers (nothing else can be chosen there)


def picker_choices(state, picker: ModelPicker) -> list:
    """The choices a picker offers now (from the state's scan, which rescans only when stale)."""
    models = [m for m in state.models() if not picker.scorers_only or m.source == "scorer"]
    return [(m.label, m.name) for m in models] if picker.labelled else [m.name for m in models]


def kept_value(names: list[str], current: Any, multi: bool) -> Any:
    """The user's selection restricted to what is still offered; the first name when nothing survives."""
    if multi:
        kept = [v for v in (current or []) if v in names]
        return kept or names[:1]
    return current if current in names else (names[0] if names else None)


def picker_updates(state, pickers: list[ModelPicker], seen: int | None, values: list) -> tuple[int, list[dict] | None]:
    """(current version, one {choices, value} dict per picker) or (version, None) when the page is up to date."""
    state.models()  # may rescan (and bump the version) when the last scan is stale
    version = state.version
    if seen == version:
        return version, None
    updates = []
    for picker, value in zip(pickers, values, strict=True):
        choices = picker_choices(state, picker)
        names = [c[1] if isinstance(c, tuple) else c for c in choices]
        updates.append({"choices": choices, "value": kept_value(names, value, picker.multi)})
    return version, updates


def wire(state, pickers: list[ModelPicker]) -> None:
    """Inside a ``gr.Blocks``: poll the state's version and refresh the pickers of this page when it changed."""
    import gradio as gr  # lazy: importing the ui modules (handlers tested on their own) must not load gradio

    if not pickers:
        return
    seen = gr.State(state.version)  # what this page was built with
    timer = gr.Timer(POLL_SECONDS)

    def on_tick(seen_version, *values):
        version, updates = picker_updates(state, pickers, seen_version, list(values))
        if updates is None:
            return (seen_version, *[gr.skip() for _ in pickers])
        return (version, *[gr.update(**u) for u in updates])

    # Polls are cheap and must not queue behind an encode: no concurrency limit, never shown as progress.
    watched = [seen, *(p.component for p in pickers)]  # read and refreshed alike
    timer.tick(on_tick, watched, watched, concurrency_limit=None, show_progress="hidden", api_visibility="private")
