"""The line a tab shows while the app's warm start (mlse.serving.warm) still prepares what its first view needs.

A press during the warm is not blocked: the handler computes what it needs itself, and this note, shown with its
result, says why that took longer than it will next time.
"""

from __future__ import annotations

from mlse.serving.warm import warm_status
from mlse.ui.text import md_escape


def preparing_note(state, tab: str) -> str:
    """The note "⏳ Preparing (n %) ..." while a warm start runs and ``tab``'s first view waits on one of its steps;
    "" otherwise.

    ``tab``: score, map, tatoeba, gold, finetune or results. ``state`` is the app's (the warm is one per app).
    """
    status = warm_status()
    pending = status.pending(tab)
    if not pending and not (status.active and status.planning):
        return ""
    current = status.current
    doing = f" (now: {md_escape(current.label)})" if current is not None else ""
    percent = f"{status.tab_fraction(tab) * 100:.0f} %"
    return (
        f"⏳ Preparing ({percent}): the app is still computing what this tab shows first{doing}. This result "
        "was computed on the spot, so it took longer than it will next time."
    )


def with_preparing_note(state, tab: str, text: str) -> str:
    """``text`` with the preparing note (if any) as its first paragraph."""
    note = preparing_note(state, tab)
    return f"{note}\n\n{text}" if note and text else (note or text)
