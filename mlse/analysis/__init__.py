"""Analyses behind the app's pictures and tables: plain numpy / sklearn functions, no gradio.

Import the submodules directly; this package imports none of them, so each stays cheap to load.
"""
