"""Start the mlse app: ``python app.py [--host H] [--port N] [--backend torch|onnx|onnx-int8] [--max-memory 1.5GB]
[--public] [--allow-hub-model ID ...] [--max-upload-rows N] [--max-upload-bytes N] [--no-fetch] [--no-warm]``.

Host and port come from ``--host`` / ``--port``, else GRADIO_SERVER_NAME (default 127.0.0.1) and GRADIO_SERVER_PORT,
as on Spaces. A port given either way must be free (the app says so and exits when it is not); without one the app
uses 7860, or the next free port when 7860 is taken, and prints which. The backend comes from ``--backend`` or
MLSE_BACKEND (default torch); the memory budget of the loaded models from ``--max-memory`` or MLSE_MAX_MEMORY
(default 1.5GB): past it, the least recently used models are unloaded.

``--public`` (implied on a Hugging Face Space, where SPACE_ID is set) serves anonymous visitors: hub downloads only
for allow-listed ids (``--allow-hub-model`` adds one), capped fine-tunes, capped uploads (see mlse.public_mode).
At start the datasets the tabs need and the data directory lacks are fetched from the hub in the background, one
progress line each (``--no-fetch`` or MLSE_FETCH=0 skips it; see mlse.data.fetch). Then what each tab shows first is
computed in the background (``--no-warm`` or MLSE_WARM=0 skips it; see mlse.serving.warm): a tab pressed meanwhile says
it is preparing.

Beside the page, scripts have a plain JSON route: ``POST /api/score`` with ``{"sentence1", "sentence2", "models"}``
(``GET /api/models`` lists the models; see mlse.serving.api_route).
"""

import argparse
import os
import sys

from mlse.encoders.identity import BACKENDS
from mlse.errors import MlseError
from mlse.serving.encoder_pool import DEFAULT_MAX_MEMORY
from mlse.serving.ports import choose_port, parse_port


def main() -> int:
    parser = argparse.ArgumentParser(description="the mlse app")
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=os.environ.get("MLSE_BACKEND", "torch"),
        help="how every model computes (default: MLSE_BACKEND, else torch)",
    )
    parser.add_argument(
        "--host",
        default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        help="address to listen on (default: GRADIO_SERVER_NAME, else 127.0.0.1)",
    )
    parser.add_argument(
        "--port", default=None, help="port to listen on (default: GRADIO_SERVER_PORT, else 7860 or the next free one)"
    )
    parser.add_argument(
        "--max-memory",
        default=os.environ.get("MLSE_MAX_MEMORY", DEFAULT_MAX_MEMORY),
        help="memory for loaded models' weights, e.g. 1.5GB, 800MB or bytes; least recently used "
        "models are unloaded past it (default: MLSE_MAX_MEMORY, else 1.5GB)",
    )
    parser.add_argument(
        "--public",
        action="store_true",
        default=False,
        help="serve anonymous visitors (on by itself when SPACE_ID is set): allow-listed hub downloads "
        "only, capped fine-tunes and uploads",
    )
    parser.add_argument(
        "--allow-hub-model",
        action="append",
        default=[],
        metavar="ID",
        help="public mode: a hub model id visitors may download besides the registry's (repeatable; "
        "also MLSE_HUB_ALLOW)",
    )
    parser.add_argument(
        "--max-upload-rows",
        type=int,
        default=None,
        help="rows an uploaded or pasted file may hold (default: MLSE_MAX_UPLOAD_ROWS, else 100000; public mode: 5000)",
    )
    parser.add_argument(
        "--max-upload-bytes",
        type=int,
        default=None,
        help="bytes an uploaded file may hold (default: MLSE_MAX_UPLOAD_BYTES, else 100000000; public mode: 1000000)",
    )
    parser.add_argument(
        "--no-fetch",
        action="store_true",
        default=os.environ.get("MLSE_FETCH", "1") == "0",
        help="do not fetch missing datasets from the hub at start (also MLSE_FETCH=0)",
    )
    parser.add_argument(
        "--no-warm",
        action="store_true",
        default=os.environ.get("MLSE_WARM", "1") == "0",
        help="do not compute each tab's first view in the background at start (also MLSE_WARM=0)",
    )
    args = parser.parse_args()
    from mlse.public_mode import allow_hub_models, enable_public_mode, public_mode, set_upload_limits

    try:
        set_upload_limits(args.max_upload_rows, args.max_upload_bytes)
    except MlseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.public:
        enable_public_mode()  # in the environment: training jobs' child processes obey it too
    allow_hub_models(args.allow_hub_model)
    if public_mode():
        print("public mode: hub downloads only for allow-listed models, capped fine-tunes and uploads", file=sys.stderr)
    try:
        source = "--port" if args.port is not None else "GRADIO_SERVER_PORT"
        requested = parse_port(args.port if args.port is not None else os.environ.get(source), source)
        port, notice = choose_port(args.host, requested, source)
    except MlseError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if notice:
        print(notice, file=sys.stderr)

    if not args.no_fetch:
        from mlse.data.fetch import app_data_dir, start_fetch

        try:
            start_fetch(app_data_dir())  # in the background: the app serves while the data arrives
        except MlseError as exc:  # an unwritable MLSE_DATA: the tabs say what is missing; the app still serves
            print(f"warning: {exc}", file=sys.stderr)

    from mlse.serving import gc_freeze
    from mlse.serving.app_state import AppState
    from mlse.serving.http_server import serve
    from mlse.serving.upload_folder import use_own_upload_folder
    from mlse.ui.app import build_server

    use_own_upload_folder()  # before any block is made: uploads land where only this app's quota and sweeps look
    gc_freeze.enable()  # what the app holds for good (models, the page) is kept out of the collector's full scans
    try:
        state = AppState(backend=args.backend, max_memory=args.max_memory)
    except MlseError as exc:  # a bad --max-memory: one line naming the flag, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    state.start()  # runs a killed job left aside are put back; the hub probe starts in the background
    if not args.no_warm:  # the Score tab's defaults load while the page is built (those already on disk)
        from mlse.ui.warm_start import start_preload

        start_preload(state)
    try:
        server = build_server(state)  # the page mounted on the JSON routes for scripts (POST /api/score)
        gc_freeze.freeze_survivors()  # the page's blocks and configs live as long as the app
        if not args.no_warm:  # after the page is built, so the warm does not slow it down; data steps after the fetch
            from mlse.ui.warm_start import start_warm

            start_warm(state)
        serve(server, args.host, port)
    except OSError as exc:  # taken between the check and the launch, or refused by the system
        print(
            f"error: cannot serve on {args.host}:{port} ({exc}); choose another port with --port N or "
            "GRADIO_SERVER_PORT=N",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
