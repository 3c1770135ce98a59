"""The pictures of "Why this score?": the word x word attribution heatmap and the word alignment heatmap.

Rows are sentence 1's words, columns sentence 2's; the axes are positions with words as tick labels, so a repeated
word keeps two rows (plotly's category axis would merge them). Words are HTML-escaped. Cells are whole numbers in a
unit scaled to the matrix (:func:`cell_scale`), since two decimals would print 0.00 on a long pair. No gradio.
"""

from __future__ import annotations

import numpy as np

from mlse.ui.text import html_text

# Diverging, centred on 0 (zmid): blue = the pair lowers the score, white = nothing, red = it raises the score.
DIVERGING = [[0.0, "#2166ac"], [0.25, "#92c5de"], [0.5, "#f7f7f7"], [0.75, "#f4a582"], [1.0, "#b2182b"]]
SEQUENTIAL = "Greens"  # the alignment's cosines: a different scale, so it is never read as an attribution
ALIGNMENT_TITLE = "Alignment (not an explanation of the score):<br>each word's most similar word in the other sentence"
ALIGNMENT_MARKS = "● each other's best match · → best match of the row's word · ↓ best match of the column's word"
MAX_CELL_TEXT = 200  # write the value into each cell only while the cells stay big enough to read it
ROW_PIXELS, MIN_HEIGHT, MAX_HEIGHT = 30, 320, 900


def cell_scale(z: np.ndarray) -> int:
    """The power of ten the cells are multiplied by so the largest |value| shows two significant digits as a whole
    number (10 <= max|z| x scale < 100; at least 1): 0.012 -> 1000 ("12"), 0.31 -> 100 ("31"), 1.7 -> 10 ("17")."""
    finite = np.abs(z[np.isfinite(z)])
    peak = float(finite.max()) if finite.size else 0.0
    return int(10 ** max(0, 1 - int(np.floor(np.log10(peak))))) if peak else 1


def cell_labels(z: np.ndarray, scale: int) -> np.ndarray:
    """Each cell's value x ``scale`` as a whole number ("-0" written "0")."""
    return np.vectorize(lambda v: f"{round(v * scale) or 0:d}" if np.isfinite(v) else "", otypes=[object])(z)


def _word_grid(words1, words2, title: str, top: int, **heatmap):
    """A heatmap (``heatmap``: its settings) of the word pairs, each cell's hover naming its pair; sentence 1 read from
    the top; ``title`` (plotly markup) in a top margin of ``top`` pixels; height grows with sentence 1's words."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    def ticks(words) -> dict:
        return {"tickmode": "array", "tickvals": list(range(len(words))), "ticktext": [html_text(w) for w in words]}

    pairs = np.array([[(html_text(a), html_text(b)) for b in words2] for a in words1], dtype=object)  # [W1, W2, 2]
    fig = go.Figure(go.Heatmap(x=list(range(len(words2))), y=list(range(len(words1))), customdata=pairs, **heatmap))
    fig.update_xaxes(tickangle=-40, title_text="sentence 2", showgrid=False, **ticks(words2))
    fig.update_yaxes(autorange="reversed", title_text="sentence 1", showgrid=False, **ticks(words1))
    fig.update_layout(
        title={"text": title, "font": {"size": 13}},
        height=int(min(MAX_HEIGHT, max(MIN_HEIGHT, 160 + ROW_PIXELS * len(words1)))),
        margin={"l": 10, "r": 10, "t": top, "b": 10},
    )
    return fig


def attribution_heatmap(words1, words2, matrix, title: str):
    """The attribution of each word pair [len(words1), len(words2)], colours centred on 0. ``title``: plain text."""
    z = np.asarray(matrix, dtype=np.float64)  # [W1, W2]
    cells = z.size <= MAX_CELL_TEXT
    scale = cell_scale(z)
    unit = "attribution" if scale == 1 else f"attribution × {scale:,}"
    note = f"<br><sub>numbers in the cells: {unit}</sub>" if cells else ""
    return _word_grid(
        words1,
        words2,
        html_text(title) + note,
        70 if note else 50,
        z=z,
        colorscale=DIVERGING,
        zmid=0.0,
        colorbar={"title": {"text": "attribution"}},
        hovertemplate="%{customdata[0]} ↔ %{customdata[1]}<br>attribution %{z:+.4f}<extra></extra>",
        text=cell_labels(z, scale) if cells else None,
        texttemplate="%{text}" if cells else None,
        textfont={"size": 10},
    )


def alignment_marks(best1, best2, shape: tuple[int, int]) -> np.ndarray:
    """[W1, W2] of "●" (each other's best match), "→" (the row word's best), "↓" (the column word's best) or ""."""
    marks = np.full(shape, "", dtype=object)
    for j, i in enumerate(best2):
        marks[i, j] = "↓"
    for i, j in enumerate(best1):
        marks[i, j] = "●" if marks[i, j] == "↓" else "→"
    return marks


def alignment_heatmap(alignment):
    """The cosine of each word pair's contextual vectors, each word's best match marked (:func:`alignment_marks`)."""
    words1, words2 = list(alignment.words1), list(alignment.words2)
    z = np.asarray(alignment.similarity, dtype=np.float64)  # [W1, W2]
    return _word_grid(
        words1,
        words2,
        f"{ALIGNMENT_TITLE}<br><sub>{ALIGNMENT_MARKS}</sub>",
        90,
        z=z,
        colorscale=SEQUENTIAL,
        text=alignment_marks(alignment.best1, alignment.best2, z.shape),
        texttemplate="%{text}",
        textfont={"size": 14},
        colorbar={"title": {"text": "cosine"}},
        hovertemplate="%{customdata[0]} ~ %{customdata[1]}<br>token cosine %{z:.3f}<extra></extra>",
    )
