"""The Gradio app. This is the only package that imports gradio; ``import mlse`` never loads it."""

from mlse.ui.app import build_app

__all__ = ["build_app"]
