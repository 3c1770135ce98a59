"""Load the page's Plotly code while the visitor is still reading, not after the first figure arrives.

Gradio fetches its large Plotly component only when a figure is first drawn, so the first figure waits for it.
:func:`preload_head` imports the same module once the page is idle (the browser keeps one instance per address, so
Gradio's own import finds it loaded); without such a file nothing is preloaded.
"""

from __future__ import annotations

from pathlib import Path

ASSET_GLOB = "PlotlyPlot-*.js"
IDLE_TIMEOUT_MS = 4000  # start the download by then even if the page never goes idle


def gradio_assets() -> Path:
    import gradio  # lazy: only the page needs it

    return Path(gradio.__file__).parent / "templates" / "frontend" / "assets"


def plotly_chunk(assets: Path | None = None) -> str | None:
    """The file name of Gradio's Plotly component among its built assets, None unless exactly one is there."""
    found = sorted((assets or gradio_assets()).glob(ASSET_GLOB))
    return found[0].name if len(found) == 1 else None


def preload_head(chunk: str | None) -> str | None:
    """A ``<script type="module">`` that imports ``assets/<chunk>`` (relative to the page, as Gradio's own
    ``index.html`` loads its bundle) once the page is idle; None without a chunk. A failed import is ignored."""
    if not chunk:
        return None
    return (
        '<script type="module">\n'
        f"const preload = () => import('./assets/{chunk}').catch(() => {{}});\n"
        "const whenIdle = () => (window.requestIdleCallback\n"
        f"  ? requestIdleCallback(preload, {{timeout: {IDLE_TIMEOUT_MS}}}) : setTimeout(preload, 1000));\n"
        "if (document.readyState === 'complete') whenIdle(); else addEventListener('load', whenIdle, {once: true});\n"
        "</script>"
    )
