"""Analyses behind the app's pictures and tables: plain numpy / sklearn functions, no gradio.

Import the submodules directly (``mlse.analysis.projection``, ``mlse.analysis.retrieval_errors``,
``mlse.analysis.sts_errors``); this package imports none of them, so each stays cheap to load and independent of the
others.
"""
