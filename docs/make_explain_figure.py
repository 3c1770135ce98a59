"""Write the docs' "Why this score?" picture: the flute pair explained by ``me5-small`` in the app.

    python docs/make_explain_figure.py          # needs Debian's chromium + chromium-driver and pip's selenium

It serves the app on loopback, types the seed paper's flute pair into Score a pair, picks ``me5-small`` under "Why this
score?", presses Explain and saves a screenshot of the attribution heatmap and the alignment beside it as
``docs/explain-flute.png`` (the same browser steps as tests/ui/test_app_browser.py's explanation test).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: tests/ and mlse/ are imported from this checkout

from tests import browser  # noqa: E402
from tests.app_server import served_app  # noqa: E402

ENGLISH = "A man is playing a flute."
GERMAN = "Ein Mann spielt Flöte."
TIMEOUT = 240  # seconds: converting and loading me5-small on a busy 2-core machine, then the explanation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="me5-small")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "explain-flute.png")
    args = parser.parse_args()
    from mlse.serving.app_state import AppState

    with served_app(AppState(default_models=(args.model,))) as url:
        driver = browser.start_chromium(window=(1400, 1400))
        try:
            browser.open_app(driver, url)
            browser.fill_textbox(driver, "Sentence 1", ENGLISH)
            browser.fill_textbox(driver, "Sentence 2", GERMAN)
            browser.pick_dropdown(driver, "Model to explain", args.model)
            browser.click(driver, "Explain")
            browser.wait_for(
                driver,
                lambda d: "Top 5 word pairs" in d.find_element("tag name", "body").text,
                TIMEOUT,
                "the explanation",
            )
            xpath = (
                "//div[contains(concat(' ', normalize-space(@class), ' '), ' row ')]"
                "[.//*[normalize-space()='Attribution: which word pairs make up the cosine']]"
            )
            rows = browser.wait_for(driver, lambda d: browser.visible(d, xpath), 30, "the two heatmaps")
            row = min(rows, key=lambda e: len(e.find_elements("xpath", ".//div")))  # the row of the two plots
            driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", row)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_bytes(row.screenshot_as_png)
            browser.optimise_png(args.out)
        finally:
            driver.quit()
    problem = browser.png_problem(args.out)
    if problem:
        sys.exit(problem)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
