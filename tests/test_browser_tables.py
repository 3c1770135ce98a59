"""The app's tables as a browser lays them out, at a desktop width (1280 px) and a phone's (390 px): no number wraps
onto a second line or is cut off, and no column header breaks inside a word.

gradio's Dataframe with ``wrap=True`` or fixed column widths broke "0.87" into "0.8 / 7" and "sim_retrieved" into
"sim_re / tri / eve / d" (issue 48); mlse.ui.tables.TABLE_OPTIONS sizes columns to their content instead. Only a
browser can see this: the layout is the front end's. Each tab gets its example file, as a visitor's first try would,
and every rendered header and numeric cell is measured in the page with ``Range.getClientRects`` (one rectangle
top per line a piece of text occupies).

Without Chromium, chromedriver or selenium the tests skip on a workstation and fail under CI (tests/ci.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mlse.serving.app_state import AppState
from tests.app_server import fresh_app_environment, served_app
from tests.browser import (
    choose,
    click,
    missing_browser,
    open_app,
    open_tab,
    page_text,
    start_chromium,
    table_row,
    upload_file,
    visible,
    wait_for,
)
from tests.ci import missing

EXAMPLES = Path(__file__).resolve().parents[1] / "assets" / "examples"
WIDTHS = (1280, 390)  # a laptop, a phone (iPhone 12-15 CSS width)
HEIGHT = 900
SCORE_TIMEOUT = 120  # seconds: the first scoring loads the embedded model on a busy 2-core machine

# Runs in the page: every visible column header and numeric cell of the open tab's tables, and what is wrong with
# them. A "line" is a distinct top of the rectangles a text range occupies; a word on two lines is split.
LAYOUT_JS = r"""
const root = arguments[0] || document;
const NUMBER = /^[+\-\u2212]?(\d[\d,]*)?(\.\d+)?%?$/;
const shown = el => el.offsetParent !== null && el.getBoundingClientRect().width > 0;
function textNodes(el) {
  const out = [], walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  while (walk.nextNode()) if (walk.currentNode.textContent.trim()) out.push(walk.currentNode);
  return out;
}
function tops(node, start, end) {
  const range = document.createRange();
  range.setStart(node, start);
  range.setEnd(node, end);
  return [...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top));
}
const lines = el => new Set(textNodes(el).flatMap(n => tops(n, 0, n.textContent.length))).size;
function splitWords(el) {
  const bad = [];
  for (const node of textNodes(el)) {
    for (const m of node.textContent.matchAll(/\S+/g)) {
      if (new Set(tops(node, m.index, m.index + m[0].length)).size > 1) bad.push(m[0]);
    }
  }
  return bad;
}
const clipped = el => el.scrollWidth > el.clientWidth + 1;
const problems = [];
const headers = [], numbers = [];
for (const th of root.querySelectorAll('[role=columnheader]')) {
  if (!shown(th)) continue;
  const text = th.innerText.trim();
  headers.push(text);
  const split = splitWords(th);
  if (split.length) problems.push(`header ${JSON.stringify(text)} splits the word(s) ${split.join(', ')}`);
  const label = th.querySelector('.header') || th;
  if (clipped(label)) problems.push(`header ${JSON.stringify(text)} is cut off`);
}
for (const cell of root.querySelectorAll('[role=gridcell]')) {
  if (!shown(cell)) continue;
  const text = cell.innerText.trim();
  if (!text || !NUMBER.test(text)) continue;
  numbers.push(text);
  const n = lines(cell);
  if (n > 1) problems.push(`number ${text} takes ${n} lines`);
  const inner = cell.querySelector('span') || cell;
  if (clipped(inner)) problems.push(`number ${text} is cut off`);
}
return {headers, numbers, problems};
"""


def layout(driver, root=None) -> dict:
    """{"headers": [text], "numbers": [text], "problems": [what is wrong]} of the visible tables under ``root``."""
    return driver.execute_script(LAYOUT_JS, root)


def _with_numbers(driver) -> dict | None:
    """:func:`layout` once the open tab's tables show numbers (None before: the table is still being drawn)."""
    found = layout(driver)
    return found if found["numbers"] else None


def _tatoeba(driver) -> None:
    choose(driver, "Your bitext")
    upload_file(
        driver, "Bitext: two aligned columns, header of language codes optional (en, de)", EXAMPLES / "bitext.tsv"
    )
    click(driver, "Show errors on my bitext")
    wait_for(driver, lambda d: "en→de: en queries de" in page_text(d), SCORE_TIMEOUT, "the bitext's errors")


def _gold(driver) -> None:
    choose(driver, "Your file")
    upload_file(
        driver, "Rated pairs: sentence1, sentence2, score (optional lang1, lang2)", EXAMPLES / "rated_pairs.tsv"
    )
    click(driver, "Compare file with gold")
    table_row(driver, "minilm-en", SCORE_TIMEOUT)


def _score_file(driver) -> None:
    upload_file(driver, "File of sentence pairs", EXAMPLES / "pairs_to_score.tsv")
    click(driver, "Score file")
    summary = (
        "//*[@role='row'][*[@role='gridcell'][1][normalize-space()='minilm-en']][*[@role='gridcell'][3]"
        "[normalize-space()='30']]"
    )
    wait_for(driver, lambda d: visible(d, summary), SCORE_TIMEOUT, "the summary row: minilm-en scored 30 rows")


# tab -> what loads its example (None: the tab's table is filled when it opens), headers its tables must show
TABS = {
    "Tatoeba errors": (_tatoeba, {"cosine retrieved", "cosine gold", "rank of gold"}),
    "Predicted vs gold": (_gold, {"Pearson", "Spearman"}),
    "Score a pair": (_score_file, {"minilm-en cosine", "minilm-en 0-5", "rows scored"}),
    "Results": (None, {"model", "metric", "value"}),
}


@pytest.fixture(scope="module")
def loaded(tmp_path_factory):
    """Chromium on the app (minilm-en its only default) with each tab's example file scored once."""
    reason = missing_browser()
    if reason:
        missing(reason)
    with fresh_app_environment(tmp_path_factory, "tables"):
        with served_app(AppState(default_models=("minilm-en",))) as url:
            driver = start_chromium((WIDTHS[0], HEIGHT))
            try:
                open_app(driver, url)
                for tab, (load, _) in TABS.items():
                    if load is not None:
                        open_tab(driver, tab)
                        load(driver)
                yield driver
            finally:
                driver.quit()


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("tab", list(TABS))
def test_numbers_stay_on_one_line_and_headers_keep_their_words(loaded, tab, width):
    open_tab(loaded, tab)
    loaded.set_window_size(width, HEIGHT)
    try:
        wait_for(loaded, lambda d: d.execute_script("return window.innerWidth") == width, 10, f"a {width} px window")
        found = wait_for(loaded, _with_numbers, 10, f"numeric cells in the tables of {tab!r}")
    finally:
        loaded.set_window_size(WIDTHS[0], HEIGHT)
    expected = TABS[tab][1]
    assert expected <= set(found["headers"]), (
        f"{tab}: headers {found['headers']} lack {expected - set(found['headers'])}"
    )
    assert not found["problems"], f"{tab} at {width} px: " + "; ".join(found["problems"][:10])


# A page with the two faults the check is for, so a check that can no longer see them fails here.
BROKEN_TABLE = """data:text/html;charset=utf-8,<div style="font: 14px sans-serif">
<div role="columnheader" style="width: 40px; word-break: break-all">sim_retrieved</div>
<div role="columnheader">rank of gold</div>
<div role="gridcell" style="width: 12px; word-break: break-all">0.87</div>
<div role="gridcell">12.5</div><div role="gridcell">a sentence, not a number</div></div>"""


def test_the_layout_check_sees_a_wrapped_number_and_a_split_header(loaded):
    app = loaded.current_window_handle
    loaded.switch_to.new_window("tab")  # the app's page, with its scored tables, stays open in its own tab
    try:
        loaded.get(BROKEN_TABLE)
        found = layout(loaded)
    finally:
        loaded.close()
        loaded.switch_to.window(app)
    assert found["headers"] == ["sim_retrieved", "rank of gold"]
    assert found["numbers"] == ["0.87", "12.5"]  # the sentence is not a number
    assert any(p.startswith('header "sim_retrieved" splits') for p in found["problems"]), found["problems"]
    assert any(p.startswith("number 0.87 takes") for p in found["problems"]), found["problems"]
    assert not [p for p in found["problems"] if "rank of gold" in p or "12.5" in p]
