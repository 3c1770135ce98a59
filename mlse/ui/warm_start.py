"""The app's warm start seen from its tabs: which model each single-model tab opens on, and starting the warm.

What a tab opens on is the app state's choice (:func:`mlse.serving.warm_plan.tab_openings`, the one the tabs make), so
the warm (:mod:`mlse.serving.warm`) computes exactly what the first press computes.
"""

from __future__ import annotations

import logging
import threading

from mlse.serving.warm_plan import tab_openings

log = logging.getLogger(__name__)


def start_preload(state) -> threading.Thread:
    """Load the Score tab's default models in the background while the page is built, those whose files are all on
    disk, so a first press waits for no load."""
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
