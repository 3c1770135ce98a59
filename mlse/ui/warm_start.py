"""The app's warm start seen from its tabs: which model each single-model tab opens on, and starting the warm.

The warm itself (:mod:`mlse.serving.warm`) knows nothing of the tabs' widgets; what a tab opens on is decided here, by
the tabs' own functions, and handed to it, so that the warm computes exactly what the first press computes.
"""

from __future__ import annotations

import logging
import threading

from mlse.ui import map_tab

log = logging.getLogger(__name__)


def tab_openings(state) -> dict[str, str | None]:
    """The model the Predicted-vs-gold, Tatoeba and Map tabs open on (the Map: a shipped Stage-1 scorer when one
    is built on the preferred backbone, see :func:`mlse.ui.map_tab.default_choice`)."""
    preferred = state.preferred_model()
    return {"gold": preferred, "tatoeba": preferred, "map": map_tab.default_model(state)}


def start_preload(state) -> threading.Thread:
    """Load the Score tab's default models in the background while the page is built, those whose files are all on
    disk (after ``mlse warm``: nothing converted or exported here), so a first press waits for no load. The warm
    start's own load steps then find them loaded."""
    from mlse.serving.warm_steps import WARM_UP_TEXT, files_ready, uncached

    def run() -> None:
        for name in state.default_selection()[0]:
            try:
                if files_ready(name, state.backend):
                    uncached(state.encoder(name)).encode([WARM_UP_TEXT])
            except Exception as exc:  # a model that does not load says so on its first press; the page still serves
                log.info("preload of %s skipped: %s", name, exc)

    thread = threading.Thread(target=run, name="mlse-preload", daemon=True)
    thread.start()
    return thread


def start_warm(state) -> threading.Thread:
    """Warm the app in the background (every step, those held in memory too; the data steps after the data fetch)."""
    from mlse.serving.warm import start_app_warm

    return start_app_warm(state, openings=tab_openings(state))
