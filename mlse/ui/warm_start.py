"""The app's warm start seen from its tabs: which model each single-model tab opens on, and starting the warm.

The warm itself (:mod:`mlse.serving.warm`) knows nothing of the tabs' widgets; what a tab opens on is decided here, by
the tabs' own functions, and handed to it, so that the warm computes exactly what the first press computes.
"""

from __future__ import annotations

import threading

from mlse.ui import map_tab


def tab_openings(state) -> dict[str, str | None]:
    """The model the Predicted-vs-gold, Tatoeba and Map tabs open on (the Map: a shipped Stage-1 scorer when one
    is built on the preferred backbone, see :func:`mlse.ui.map_tab.default_choice`)."""
    preferred = state.preferred_model()
    return {"gold": preferred, "tatoeba": preferred, "map": map_tab.default_model(state)}


def start_warm(state) -> threading.Thread:
    """Warm the app in the background (every step, those held in memory too; the data steps after the data fetch)."""
    from mlse.serving.warm import start_app_warm

    return start_app_warm(state, openings=tab_openings(state))
