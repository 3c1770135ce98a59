"""Regenerate every figure of the docs and the README with one command.

    python docs/make_figures.py                      # everything (the browser steps need chromium + chromium-driver)
    python docs/make_figures.py --only thumbs,plots  # seconds, no browser

Steps, in order (``--only`` picks some, by name):

* ``screenshots``: one PNG per tab of the app, ``docs/tab-N-NAME.png`` (``docs/make_screenshots.py``: the app served on
  loopback, headless Chromium, one press of each tab's main button);
* ``explain``: ``docs/explain-flute.png``, *Why this score?* on the flute pair (``docs/make_explain_figure.py``);
* ``thumbs``: ``docs/figures/thumb-N-NAME.png``, the top of each tab screenshot, small, for the README's tour;
* ``plots``: the SVG plots under ``docs/figures`` drawn from result files and the shipped calibrations
  (``docs/plots.py``).

A browser step that cannot run here (no Chromium) is reported and the others still run; the exit status is then 1.
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))  # run as a script from anywhere: tests/ and mlse/ are imported from this checkout

from mlse.atomic import atomic_write_bytes  # noqa: E402

FIGURES = DOCS / "figures"
STEPS = ("screenshots", "explain", "thumbs", "plots")
BROWSER_SCRIPTS = {"screenshots": "make_screenshots.py", "explain": "make_explain_figure.py"}
THUMB_CROP = (0, 0, 1400, 1050)  # px of a 1400-px-wide tab screenshot: the title, the tab bar and the tab's top
THUMB_WIDTH = 420


def thumbnails(out: Path = FIGURES) -> list[Path]:
    """A small picture of each tab screenshot (``docs/tab-N-NAME.png`` -> ``thumb-N-NAME.png``)."""
    from PIL import Image  # lazy: only this step needs it

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for shot in sorted(DOCS.glob("tab-*.png")):
        with Image.open(shot) as image:
            box = (0, 0, min(THUMB_CROP[2], image.width), min(THUMB_CROP[3], image.height))
            part = image.convert("RGB").crop(box)
        height = round(part.height * THUMB_WIDTH / part.width)
        small = part.resize((THUMB_WIDTH, height), Image.Resampling.LANCZOS).quantize(colors=128)
        buffer = io.BytesIO()
        small.save(buffer, format="PNG", optimize=True)
        path = out / shot.name.replace("tab-", "thumb-", 1)
        atomic_write_bytes(path, buffer.getvalue())
        written.append(path)
    return written


def browser_step(step: str) -> str | None:
    """Run one browser script; None when it worked, else why not."""
    from tests.browser import missing_browser

    reason = missing_browser()
    if reason:
        return reason
    done = subprocess.run([sys.executable, str(DOCS / BROWSER_SCRIPTS[step])], cwd=ROOT)
    return None if done.returncode == 0 else f"docs/{BROWSER_SCRIPTS[step]} exited with status {done.returncode}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=",".join(STEPS), help=f"comma-separated steps of: {', '.join(STEPS)}")
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        print(f"error: unknown step {', '.join(unknown)}; choose from {', '.join(STEPS)}", file=sys.stderr)
        return 2
    failed = []
    for step in STEPS:  # always in this order: thumbnails are cut from fresh screenshots
        if step not in steps:
            continue
        if step in BROWSER_SCRIPTS:
            problem = browser_step(step)
            if problem:
                failed.append(step)
                print(f"{step}: not made: {problem}", file=sys.stderr)
            continue
        if step == "thumbs":
            paths = thumbnails()
        else:
            from docs.plots import write_all  # this folder's plots module, imported from the checkout

            paths = write_all()
        for path in paths:
            print(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KB")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
