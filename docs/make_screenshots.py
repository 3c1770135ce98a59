"""Write the docs' screenshots: one PNG per tab of the app, each showing real output, under docs/.

    python docs/make_screenshots.py            # needs Debian's chromium + chromium-driver and pip's selenium

It serves the app on loopback with this checkout's models (the embedded ``minilm-en`` plus whatever ``runs/`` holds),
opens it in headless Chromium and on each tab presses the main button once where that is quick: scores a pair, projects
the language map, lists Tatoeba errors for Swiss German (117 sentences), compares predictions with gold on STS en-en.
The fine-tune tab is shown as a form (training takes minutes) and the results tab as loaded from results/.
The browser steps are the ones tests/ui/test_app_browser.py checks (tests/browser.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: tests/ and mlse/ are imported from this checkout

from tests import browser  # noqa: E402
from tests.app_server import served_app  # noqa: E402

MAX_HEIGHT = 1800  # px: tall enough for a tab's plots, short enough to keep each PNG well under 300 KB
STEP_TIMEOUT = 180  # seconds; loading several models on a busy 2-core machine is the slow part
ENGLISH = "A man is playing a flute."
GERMAN = "Ein Mann spielt Flöte."
MAP_SENTENCES = 40  # per language: three UMAPs of 8 x 100 points take over a minute on 2 cores, 8 x 40 a few seconds


def score(driver) -> None:
    browser.fill_textbox(driver, "Sentence 1", ENGLISH)
    browser.fill_textbox(driver, "Sentence 2", GERMAN)
    browser.click(driver, "Score")
    browser.table_row(driver, "minilm-en", STEP_TIMEOUT)


def language_map(driver) -> None:
    browser.set_slider(driver, "Sentences per language", MAP_SENTENCES)
    browser.click(driver, "Project")
    # the tab may open on a map in the cache (another sample size): wait for this one, not any drawn plot
    drawn = f"languages × {MAP_SENTENCES} FLORES sentences"
    browser.wait_for(driver, lambda d: drawn in d.find_element("tag name", "body").text, STEP_TIMEOUT, repr(drawn))
    browser.visible_plot(driver, STEP_TIMEOUT)


# Gradio's progress display over an output that is still being computed (its status tracker's classes)
BUSY = "//*[contains(@class, 'eta-bar') or contains(@class, 'progress-level') or contains(@class, 'progress-text')]"


def settled(driver) -> None:
    """Wait until no output of the page shows a progress bar or timer: a screenshot then shows results, not work."""
    browser.wait_for(driver, lambda d: not browser.visible(d, BUSY), STEP_TIMEOUT, "the page's progress bars to end")


def tatoeba(driver) -> None:
    browser.pick_dropdown(driver, "Language (paired with English)", "gsw")
    browser.click(driver, "Show errors")
    browser.wait_for(driver, browser.table_rows, STEP_TIMEOUT, "rows in the errors table")


def gold(driver) -> None:
    browser.pick_dropdown(driver, "STS Multi MT pair (sentence1 lang - sentence2 lang)", "en-en")
    browser.click(driver, "Compare with gold")
    browser.table_row(driver, "me5-small", STEP_TIMEOUT)  # the tab opens on me5-small
    browser.visible_plot(driver, STEP_TIMEOUT)


# What to do on each tab before its screenshot (browser.TABS order); None: the tab as it opens.
ACTIONS = {"score": score, "map": language_map, "tatoeba": tatoeba, "gold": gold, "finetune": None, "results": None}


def capture(out_dir: Path) -> list[Path]:
    written = []
    with served_app() as url:
        driver = browser.start_chromium()
        try:
            browser.open_app(driver, url)
            for index, tab in enumerate(browser.TABS):
                started = time.monotonic()
                browser.open_tab(driver, tab.name)
                action = ACTIONS[tab.slug]
                if action is not None:
                    try:
                        action(driver)
                    except Exception:  # keep what the page showed when the step failed, to see why
                        browser.screenshot(driver, out_dir / f"failed-{tab.slug}.png", MAX_HEIGHT)
                        raise
                settled(driver)
                time.sleep(1.5)  # let Plotly finish drawing and the progress bar fade out
                path = browser.screenshot(driver, out_dir / browser.screenshot_name(index, tab), MAX_HEIGHT)
                browser.optimise_png(path)
                print(
                    f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
                    f"{path.stat().st_size // 1024} KB, {time.monotonic() - started:.0f} s"
                )
                written.append(path)
        finally:
            driver.quit()
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="folder for tab-N-NAME.png (default: docs/)")
    args = parser.parse_args(argv)
    reason = browser.missing_browser()
    if reason:
        print(reason, file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for path in capture(args.out):
        problem = browser.png_problem(path)
        if problem:
            print(problem, file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
