"""Tab 1: score a sentence pair with every selected model."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from mlse.errors import MlseError

MAX_CHARS = 2000  # sentence encoders truncate long inputs anyway; keep requests small
EXAMPLES_FILE = Path(__file__).resolve().parents[2] / "assets" / "examples.tsv"


def clean_text(text: str | None) -> tuple[str, str]:
    """Strip control characters and truncate; returns (text, notice)."""
    text = "".join(ch for ch in (text or "") if ch in "\t\n" or ch.isprintable()).strip()
    notice = ""
    if len(text) > MAX_CHARS:
        text, notice = text[:MAX_CHARS], f"Input truncated to {MAX_CHARS} characters."
    return text, notice


def score_pair(state, sentence1: str, sentence2: str, models: list[str]) -> tuple[list[list], str]:
    """Cosine similarity of the two sentences under each model -> (table rows, status message)."""
    s1, n1 = clean_text(sentence1)
    s2, n2 = clean_text(sentence2)
    if not s1 or not s2:
        return [], "Enter two non-empty sentences."
    if not models:
        return [], "Choose at least one model."
    rows, problems = [], []
    for name in models:
        try:
            emb = state.encoder(name).encode([s1, s2])  # [2, d]
        except MlseError as exc:
            problems.append(html.escape(str(exc)))
            continue
        rows.append([name, round(float(np.dot(emb[0], emb[1])), 4)])
    message = " ".join(m for m in (n1, n2, *problems) if m)
    return rows, message


def load_examples() -> list[list[str]]:
    lines = EXAMPLES_FILE.read_text(encoding="utf-8").split("\n")[1:]
    return [line.split("\t")[:2] for line in lines if line.strip()]


def build_tab(state) -> None:
    import gradio as gr

    with gr.Tab("Score a pair"):
        with gr.Row():
            s1 = gr.Textbox(label="Sentence 1", lines=2)
            s2 = gr.Textbox(label="Sentence 2", lines=2)
        names = state.model_names()
        models = gr.CheckboxGroup(names, value=names[:1], label="Models")
        button = gr.Button("Score", variant="primary")
        table = gr.Dataframe(headers=["model", "cosine"], label="Similarity", interactive=False)
        status = gr.Markdown()
        gr.Examples(load_examples(), inputs=[s1, s2])
        button.click(lambda a, b, m: score_pair(state, a, b, m), [s1, s2, models], [table, status],
                     api_name="score_pair", concurrency_limit=2)  # fmt: skip
