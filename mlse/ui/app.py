"""Assemble the tabs into one Blocks app."""

from __future__ import annotations

from mlse.ui import score_tab
from mlse.ui.state import AppState

TABS = [score_tab]


def build_app(state: AppState | None = None):
    import gradio as gr

    state = state or AppState()
    with gr.Blocks(title="mlse: multilingual semantic similarity") as demo:
        gr.Markdown("# mlse: multilingual semantic textual similarity")
        for tab in TABS:
            tab.build_tab(state)
    demo.queue(default_concurrency_limit=2, max_size=32)
    return demo
