"""The app in a real headless Chromium: the page loads, a pair is scored by clicking, and each of the six tabs opens.

This is what gradio_client (tests/ui/test_app_client.py) cannot see: the JavaScript front end rendering the Python
layout. Each tab's screenshot goes to a temporary folder and is checked to be a real picture; docs/make_screenshots.py
writes the ones shown in the README.

Without Chromium, chromedriver or selenium the tests skip on a workstation but fail under CI (CI=true), where .ci/run
installs them: a CI run that skipped the browser would report green without ever having opened the page.
"""

from __future__ import annotations

import pytest

from mlse.serving.app_state import AppState
from mlse.ui.tatoeba_tab import ERROR_COLUMNS
from tests.app_server import fresh_app_environment, served_app
from tests.browser import (
    TABS,
    allow_downloads,
    app_page,
    button,
    choose,
    click,
    download,
    fill_textbox,
    missing_browser,
    open_tab,
    page_text,
    pick_dropdown,
    png_problem,
    screenshot,
    screenshot_name,
    shown_buttons,
    table_row,
    upload_file,
    visible,
    visible_plot,
    wait_for,
)
from tests.ci import missing
from tests.paths import EXAMPLES

ENGLISH = "A man is playing a flute."
FRENCH = "Un homme joue de la flûte."
SCORE_TIMEOUT = 90  # seconds; the first click loads the embedded model


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Chromium with the app's page open, with minilm-en as its only default (empty runs dir, no hub)."""
    reason = missing_browser()
    if reason:
        missing(reason)
    with fresh_app_environment(tmp_path_factory, "browser"):
        # Only minilm-en is ticked: scoring one pair must not convert e5 or load USE in CI (their own tests do).
        with served_app(AppState(default_models=("minilm-en",))) as url:
            with app_page(url) as driver:
                yield driver


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    return tmp_path_factory.mktemp("screenshots")


def test_score_a_pair_by_clicking(browser):
    open_tab(browser, TABS[0].name)
    fill_textbox(browser, "Sentence 1", ENGLISH)
    fill_textbox(browser, "Sentence 2", FRENCH)
    click(browser, "Score")
    _model, kind, cosine, *_ = table_row(browser, "minilm-en", SCORE_TIMEOUT)
    assert kind == "backbone"
    assert -1.0 <= float(cosine) <= 1.0
    page = browser.find_element("tag name", "body").text
    assert "French" in page and "English" in page  # the detected languages, shown with the score


def test_plotly_code_is_loaded_before_any_figure(browser):
    """mlse.ui.plotly_preload: the page fetches Gradio's Plotly component while idle, so the first figure a visitor
    asks for does not wait for it; on the first tab no figure is drawn, so only the preload can have fetched it."""
    open_tab(browser, TABS[0].name)
    assert not browser.find_elements("css selector", ".js-plotly-plot")
    fetched = "return performance.getEntriesByType('resource').map(e => e.name).filter(n => n.includes('/PlotlyPlot-'))"
    assert wait_for(browser, lambda d: d.execute_script(fetched), 20, "Plotly's component fetched by the preload")


@pytest.mark.parametrize("index", range(len(TABS)), ids=[tab.slug for tab in TABS])
def test_each_tab_opens(browser, shots, index):
    tab = TABS[index]
    open_tab(browser, tab.name)
    assert button(browser, tab.marker).is_displayed()
    # The other tabs' buttons must be hidden: the click switched the content, not only the highlighted header.
    shown_elsewhere = shown_buttons(browser, [other.marker for other in TABS if other != tab])
    assert not shown_elsewhere, f"{tab.name!r} open, yet buttons of other tabs are visible: {shown_elsewhere}"
    problem = png_problem(screenshot(browser, shots / screenshot_name(index, tab)))
    assert problem is None, problem


def test_screenshot_check_rejects_blank_pages(tmp_path):
    """The check the tab tests rely on: a (nearly) blank page is not accepted as a screenshot of a tab."""
    import numpy as np
    from PIL import Image

    page = np.full((1000, 1400, 3), 255, dtype=np.uint8)
    page[:60, :100] = np.random.default_rng(0).integers(0, 256, (60, 100, 3))  # 0.4 % noise: big file, still blank
    Image.fromarray(page).save(tmp_path / "blank.png")
    assert "one colour" in png_problem(tmp_path / "blank.png")
    page[:400] = np.random.default_rng(1).integers(0, 256, (400, 1400, 3))
    Image.fromarray(page).save(tmp_path / "busy.png")
    assert png_problem(tmp_path / "busy.png") is None
    (tmp_path / "text.png").write_text("not an image")
    assert "not a PNG" in png_problem(tmp_path / "text.png")


# -- the user's own data: a file uploaded in each of the four tabs that take one ------------------------------------
def test_score_a_file_upload_and_download(browser, tmp_path):
    """Upload the example pairs, score them, download the scored CSV and check it row by row against the library."""
    import pandas as pd

    import mlse

    open_tab(browser, TABS[0].name)
    upload_file(browser, "File of sentence pairs", EXAMPLES / "pairs_to_score.tsv")
    click(browser, "Score file")
    # the summary's row for minilm-en (the pair table above may hold a minilm-en row of an earlier test)
    summary = (
        "//*[@role='row'][*[@role='gridcell'][1][normalize-space()='minilm-en']][*[@role='gridcell'][3]"
        "[normalize-space()='30']]"
    )
    wait_for(browser, lambda d: visible(d, summary), SCORE_TIMEOUT, "the summary row: minilm-en scored 30 rows")
    allow_downloads(browser, tmp_path)
    scored = pd.read_csv(download(browser, "pairs_to_score-scored.csv", tmp_path), keep_default_na=False)
    given = pd.read_csv(EXAMPLES / "pairs_to_score.tsv", sep="\t", keep_default_na=False)
    assert list(scored.columns[: len(given.columns)]) == list(given.columns)  # the user's columns first
    assert scored[list(given.columns)].equals(given)
    cosine, calibrated = mlse.load_model("minilm-en").similarity(given["sentence1"], given["sentence2"])
    for i, (expected, got) in enumerate(zip(cosine, scored["minilm-en cosine"])):
        assert abs(float(got) - float(expected)) < 1e-4, f"row {i + 1}: {got} != {expected}"
    assert calibrated is not None
    assert max(abs(scored["minilm-en 0-5"].to_numpy(float) - calibrated)) < 1e-3


def test_predicted_vs_gold_on_an_uploaded_file(browser):
    open_tab(browser, "Predicted vs gold")
    choose(browser, "Your file")
    upload_file(
        browser, "Rated pairs: sentence1, sentence2, score (optional lang1, lang2)", EXAMPLES / "rated_pairs.tsv"
    )
    click(browser, "Compare file with gold")
    _model, n, pearson, *_ = table_row(browser, "minilm-en", SCORE_TIMEOUT)
    assert n == "41" and -100 <= float(pearson) <= 100
    visible_plot(browser, 30)
    assert "language pair" in page_text(browser) and "en-de" in page_text(browser)  # the slices table


def test_language_map_of_uploaded_sentences(browser):
    open_tab(browser, TABS[1].name)
    accordion = (
        "//button[.//span[normalize-space()='Map your own sentences']] | "
        "//*[@role='button'][normalize-space()='Map your own sentences']"
    )
    if not visible(browser, "//button[normalize-space()='Project my sentences']"):
        wait_for(browser, lambda d: visible(d, accordion), 10, "the accordion 'Map your own sentences'")[0].click()
    upload_file(browser, "Sentences file (TSV, CSV or JSONL)", EXAMPLES / "sentences.tsv")
    click(browser, "Project my sentences")
    wait_for(
        browser,
        lambda d: "30 sentences from sentences.tsv" in page_text(d),
        SCORE_TIMEOUT,
        "the map of the uploaded sentences",
    )
    visible_plot(browser, 10)


def test_tatoeba_errors_on_an_uploaded_bitext(browser):
    open_tab(browser, TABS[2].name)
    choose(browser, "Your bitext")
    upload_file(
        browser, "Bitext: two aligned columns, header of language codes optional (en, de)", EXAMPLES / "bitext.tsv"
    )
    click(browser, "Show errors on my bitext")
    wait_for(browser, lambda d: "en→de: en queries de" in page_text(d), SCORE_TIMEOUT, "the bitext's accuracy table")
    assert "xSIM error" in page_text(browser)


# -- "Why this score?": an explanation opened from Score a pair and from a Tatoeba error row ----------------------
GERMAN = "Ein Mann spielt Flöte."
EXPLAIN_TIMEOUT = 150  # seconds: loading minilm-en, then integrated Jacobians on a busy 2-core machine
_PLOT = "//div[contains(@class, 'js-plotly-plot')]"


def _plot_labels(driver) -> list[set[str]]:
    """The tick labels (the words) of each visible plotly figure, in page order."""
    ticks = ".//*[local-name()='g'][contains(@class, 'xtick') or contains(@class, 'ytick')]/*[local-name()='text']"
    plots = visible(driver, _PLOT)
    return [{t.get_attribute("textContent") for t in plot.find_elements("xpath", ticks)} for plot in plots]


def test_explain_a_pair_from_score_a_pair(browser):
    open_tab(browser, TABS[0].name)
    fill_textbox(browser, "Sentence 1", ENGLISH)
    fill_textbox(browser, "Sentence 2", GERMAN)
    pick_dropdown(browser, "Model to explain", "minilm-en")
    click(browser, "Explain")
    wait_for(browser, lambda d: "Top 5 word pairs" in page_text(d), EXPLAIN_TIMEOUT, "the explanation's text")
    labels = wait_for(
        browser,
        lambda d: [s for s in _plot_labels(d) if {"flute", "Flöte"} <= s],
        30,
        "a heatmap with the words of both sentences as its labels",
    )
    assert {"man", "playing", "Mann", "spielt"} <= labels[0]
    page = page_text(browser)
    assert "residual" in page and "not an explanation of the score" in page.lower().replace("\n", " ")


def test_explain_a_tatoeba_error_row(browser):
    open_tab(browser, TABS[2].name)
    choose(browser, "Your bitext")
    click(browser, "Paste the example")  # empties the file field, where an earlier test may have left the bitext
    upload_file(
        browser, "Bitext: two aligned columns, header of language codes optional (en, de)", EXAMPLES / "bitext.tsv"
    )
    click(browser, "Show errors on my bitext")
    wait_for(browser, lambda d: "en→de: en queries de" in page_text(d), SCORE_TIMEOUT, "the bitext's accuracy table")
    first = "[normalize-space()='en→de' or normalize-space()='de→en']"
    row = f"//*[@role='row'][*[@role='gridcell'][1]{first}]"
    query_at = ERROR_COLUMNS.index("query") + 1  # the scores come first, then the sentences (mlse.ui.tatoeba_tab)
    query_cell = wait_for(browser, lambda d: visible(d, f"{row}/*[@role='gridcell'][{query_at}]"), 10, "an error row")[
        0
    ]
    query = query_cell.text.strip()
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", query_cell)
    query_cell.click()
    wait_for(browser, lambda d: "Gold translation" in page_text(d), 30, "the selected row's neighbours")
    click(browser, "Explain this error")
    wait_for(browser, lambda d: "Query vs gold" in page_text(d), EXPLAIN_TIMEOUT, "the two explanations")
    plots = wait_for(browser, lambda d: [s for s in _plot_labels(d) if s], 30, "the two heatmaps")
    assert len(plots) == 2, f"expected query vs retrieved and query vs gold, got {len(plots)} plots"
    assert query.split()[0] in plots[0] and query.split()[0] in plots[1]  # the query's words label both heatmaps
