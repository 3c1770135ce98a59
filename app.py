"""Start the mlse app: ``python app.py`` (port 7860; host from GRADIO_SERVER_NAME, default 127.0.0.1)."""

import os

from mlse.ui import build_app

if __name__ == "__main__":
    build_app().launch(
        server_name=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
        server_port=int(os.environ.get("GRADIO_SERVER_PORT", "7860")),
    )
