"""Assemble the six tabs into one Blocks app (each tab is its own module with ``build_tab(state)``)."""

from __future__ import annotations

import os
from pathlib import Path

from mlse.public_mode import MAX_UPLOAD_BYTES, public_mode, upload_limits
from mlse.serving.app_state import AppState
from mlse.serving.request_limits import RequestLimits, body_limit
from mlse.serving.upload_folder import LOCAL_QUOTA, PUBLIC_QUOTA, UploadFolder, install, start_sweeper
from mlse.ui import finetune_tab, gold_tab, map_tab, model_pickers, results_tab, score_tab, tatoeba_tab
from mlse.ui.credits import CREDITS_MARKDOWN

# The order users meet them: demo first, then the analyses, then training and the record of every run.
TABS = [score_tab, map_tab, tatoeba_tab, gold_tab, finetune_tab, results_tab]
QUEUE_MAX_SIZE = 32  # requests waiting beyond this are refused with a "queue full" message, not left hanging
DEFAULT_CONCURRENCY = 2  # two cores: more parallel encodes only slow each other down
# Gradio's queue recomputes a monitoring summary (off here) over its last events on every event: a large CPU share
# under load. Fewer, smaller summaries instead; an operator's own setting wins.
QUEUE_ANALYTICS_ENV = {"GRADIO_ANALYTICS_CACHE_FREQUENCY": "1000", "GRADIO_ANALYTICS_MAX_EVENTS": "1000"}


def build_app(state: AppState | None = None):
    import gradio as gr  # lazy: importing the ui modules (handlers tested on their own) must not load gradio

    for name, value in QUEUE_ANALYTICS_ENV.items():
        os.environ.setdefault(name, value)  # read when the queue is made, below
    state = state or AppState().start()
    with gr.Blocks(title="mlse: multilingual semantic similarity") as demo:
        backend = "" if state.backend == "torch" else f" · models run on {state.backend}"
        gr.Markdown(f"# mlse: multilingual semantic textual similarity{backend}")
        pickers = [picker for tab in TABS for picker in tab.build_tab(state)]  # the model pickers each tab built
        model_pickers.wire(state, pickers)  # a run trained while the page is open joins every picker
        gr.Markdown(CREDITS_MARKDOWN, elem_id="credits")
    demo.queue(default_concurrency_limit=DEFAULT_CONCURRENCY, max_size=QUEUE_MAX_SIZE)
    return demo


# Gradio keeps about 0.5 MB of state per session, and every API call without a session opens one: bound the count (a
# page whose session was dropped keeps working; only its map highlight needs a redraw).
SESSION_CAPACITY = 200


def launch_options() -> dict:
    """Extra ``launch()`` arguments: the bound on sessions kept in memory, the ``<head>`` script that loads Plotly's
    page code while the page is idle and, on a public deployment, a cap on Gradio's upload route (open to anyone)."""
    from mlse.ui.plotly_preload import plotly_chunk, preload_head

    options = {"state_session_capacity": SESSION_CAPACITY, "head": preload_head(plotly_chunk())}
    return (options | {"max_file_size": MAX_UPLOAD_BYTES}) if public_mode() else options


def build_server(state: AppState | None = None):
    """The app as ``python app.py`` serves it: a FastAPI app of our own holding the JSON routes for scripts
    (:mod:`mlse.serving.api_route`: ``POST /api/score``, ``GET /api/models``), with the page mounted at ``/``.

    What ``launch()`` would set is set here the same way (``has_launched`` included, without which Gradio skips its
    upload-folder check). A file parameter must be an upload of the calling session (:mod:`mlse.serving.upload_folder`);
    request bodies are capped (:mod:`mlse.serving.request_limits`)."""
    import gradio as gr  # lazy: importing the ui modules (handlers tested on their own) must not load gradio
    from gradio.utils import get_upload_folder  # lazy: as above

    from mlse.serving.api_route import json_api
    from mlse.serving.torch_threads import limit_torch_threads

    state = state or AppState().start()
    limit_torch_threads(state.backend)  # on ONNX, torch computes only the heads: one thread is faster
    folder = UploadFolder(Path(get_upload_folder()), PUBLIC_QUOTA if public_mode() else LOCAL_QUOTA)
    install(folder)  # every tab's reader asks it (mlse.ui.uploads.read_upload)
    start_sweeper(folder)  # uploads older than the quota's age go, traffic or not (and at once: left by a restart)
    demo = build_app(state)

    def end_session(request) -> None:  # the page was closed: its uploads go with it
        folder.end_session(request.session_hash)

    end_session.__annotations__["request"] = gr.Request  # Gradio passes the request to a parameter annotated so

    demo.unload(end_session)
    options = launch_options()
    # launch() sets this attribute from its argument; Gradio's session store reads it when the mounted app is made
    demo.state_session_capacity = options.pop("state_session_capacity")
    on_space = bool(os.environ.get("SPACE_ID"))  # launch() makes the page installable (a PWA) on a Space
    api = json_api(state)
    api.add_middleware(RequestLimits, folder=folder, max_body_bytes=body_limit(upload_limits()[1]))
    server = gr.mount_gradio_app(api, demo, path="/", show_error=False, pwa=on_space, **options)
    demo.has_launched = True  # launch() sets it; Gradio's own upload-folder check runs only when it is set
    return server
