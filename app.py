"""Start the mlse app: ``python app.py [--backend torch|onnx|onnx-int8] [--max-memory 1.5GB]``.

Host and port come from GRADIO_SERVER_NAME (default 127.0.0.1) and GRADIO_SERVER_PORT (default 7860), as on Spaces;
the backend from ``--backend`` or MLSE_BACKEND (default torch); the memory budget of the loaded models from
``--max-memory`` or MLSE_MAX_MEMORY (default 1.5GB): past it, the least recently used models are unloaded.
"""

import argparse
import os
import sys

from mlse.encoders import BACKENDS
from mlse.errors import MlseError
from mlse.memory_budget import DEFAULT_MAX_MEMORY
from mlse.ui import build_app
from mlse.ui.state import AppState

if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="the mlse app")
    parser.add_argument("--backend", choices=BACKENDS, default=os.environ.get("MLSE_BACKEND", "torch"),
                        help="how every model computes (default: MLSE_BACKEND, else torch)")  # fmt: skip
    parser.add_argument("--max-memory", default=os.environ.get("MLSE_MAX_MEMORY", DEFAULT_MAX_MEMORY),
                        help="memory for loaded models' weights, e.g. 1.5GB, 800MB or bytes; least recently used "
                             "models are unloaded past it (default: MLSE_MAX_MEMORY, else 1.5GB)")  # fmt: skip
    args = parser.parse_args()
    try:
        state = AppState(backend=args.backend, max_memory=args.max_memory)
    except MlseError as exc:  # a bad --max-memory: one line naming the flag, no traceback
        sys.exit(f"error: {exc}")
    build_app(state).launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
    )
