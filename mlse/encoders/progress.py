"""Encoding progress bars: shown only on a terminal.

A tqdm bar redraws itself with carriage returns; in a log file or a pipe (``mlse score 2> log``, a test capturing
stderr) that is a line of noise per redraw. Every encode path (:mod:`mlse.encoders.torch`,
:mod:`mlse.encoders.onnx.runtime`, :mod:`mlse.encoders.use`) asks :func:`show_bar` whether to draw one, and draws it
with :func:`progress_bar`.
"""

from __future__ import annotations

import sys

AUTO_MIN_TEXTS = 1000  # show_progress=None: a bar for this many texts or more


def show_bar(show_progress: bool | None, n_texts: int) -> bool:
    """Whether to draw a bar: asked for (None: ``n_texts >= AUTO_MIN_TEXTS``) and stderr is a terminal."""
    wanted = n_texts >= AUTO_MIN_TEXTS if show_progress is None else bool(show_progress)
    if not wanted:
        return False
    try:
        return bool(sys.stderr is not None and sys.stderr.isatty())
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


def progress_bar(total: int, desc: str):
    """A tqdm bar on stderr, or None when tqdm is missing."""
    try:
        from tqdm.auto import tqdm  # lazy: optional progress bar
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit="text")
