"""Start the mlse app: ``python app.py [--backend torch|onnx|onnx-int8]``.

Host and port come from GRADIO_SERVER_NAME (default 127.0.0.1) and GRADIO_SERVER_PORT (default 7860), as on Spaces;
the backend from ``--backend`` or MLSE_BACKEND (default torch).
"""

import argparse
import os

from mlse.encoders import BACKENDS
from mlse.ui import build_app
from mlse.ui.state import AppState

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the mlse app")
    parser.add_argument("--backend", choices=BACKENDS, default=os.environ.get("MLSE_BACKEND", "torch"),
                        help="how every model computes (default: MLSE_BACKEND, else torch)")  # fmt: skip
    args = parser.parse_args()
    build_app(AppState(backend=args.backend)).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
    )
