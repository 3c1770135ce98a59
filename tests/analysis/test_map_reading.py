"""The map's one-line reading (mlse.analysis.map_reading), on hand-made numbers: each verdict and its opposite."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.analysis.map_reading import map_reading, pct, reading_of, separation
from mlse.analysis.map_sample import Sample
from mlse.analysis.projection import LanguageMap, SpaceView

CHANCE = 0.125  # eight languages
ALL = ("raw", "meaning", "language")


def _numbers(raw, meaning, language, retrieval=(0.99, 0.97, 0.03)):
    return dict(zip(ALL, (raw, meaning, language))), dict(zip(ALL, retrieval))


def test_pct_keeps_one_decimal_only_where_it_says_something():
    assert [pct(x) for x in (0.359, 0.5, 1.0, 0.0, 0.995, None)] == ["35.9 %", "50 %", "100 %", "0 %", "99.5 %", "n/a"]


@pytest.mark.parametrize(
    ("meaning", "language", "chance", "verdict"),
    [
        (0.36, 0.99, CHANCE, "separated"),  # me5-small's shipped head on the default sample
        (0.23, 0.51, CHANCE, "separated"),  # muse: a weak language space, but the meaning space keeps a third of it
        (0.70, 0.99, CHANCE, "partly"),
        (0.97, 0.99, CHANCE, "not"),
        (0.40, 0.40, 0.33, "not"),  # the same in both spaces
        (0.20, 0.30, 0.33, "not"),  # the language space is at chance: it identifies nothing
    ],
)
def test_separation_compares_the_probes_above_chance(meaning, language, chance, verdict):
    assert separation(meaning, language, chance) == verdict


def test_a_head_that_separated_them_is_read_as_such():
    line = map_reading(*_numbers(0.99, 0.36, 0.99), CHANCE)
    assert line.startswith("Languages mix in the meaning space")
    assert "36 %" in line and "99 %" in line and "chance 12.5 %" in line  # the numbers it was written from
    assert "linear classifier naming each sentence's language" in line  # what the probe is
    assert "the head separated meaning from language;" in line and "still found" in line and "97 %" in line
    assert "\n" not in line


def test_the_opposite_case_says_the_head_did_not_separate_them():
    line = map_reading(*_numbers(0.99, 0.97, 0.99), CHANCE)
    assert line.startswith("Languages stay apart in the meaning space")
    assert "did not separate meaning from language" in line and "97 %" in line
    assert "separated meaning from language;" not in line


def test_partial_separation_and_lost_meaning_are_said():
    line = map_reading(*_numbers(0.99, 0.70, 0.99, retrieval=(0.99, 0.20, 0.02)), CHANCE)
    assert line.startswith("Languages only partly mix") and "only in part" in line
    assert "rarely found as nearest neighbours" in line and "20 %" in line


def test_without_a_head_only_the_raw_space_is_read():
    line = map_reading({"raw": 0.99}, {"raw": 0.995}, CHANCE)
    assert line.startswith("Only the raw space is shown (no Stage-1 head)")
    assert "99 %" in line and "99.5 %" in line and "Stage-1 head" in line


def test_no_probe_gives_its_reason_not_a_verdict():
    line = map_reading({"raw": None}, {"raw": None}, 1.0, no_probe_reason="needs 2 languages")
    assert line == "No reading: the language probe cannot be measured on this sample (needs 2 languages)."
    assert map_reading({"raw": 0.9, "meaning": None, "language": None}, {}, 0.5).startswith("No reading")


def test_reading_of_a_computed_map_uses_its_views_and_chance():
    sample = Sample(["eng", "deu"], np.arange(2), ["a", "b", "c", "d"], np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]))
    result = LanguageMap("m", "m:1", "pca", 0, sample)
    for space, (probe, retrieval) in zip(ALL, [(1.0, 1.0), (0.5, 1.0), (1.0, 0.0)]):
        result.views[space] = SpaceView(space, np.zeros((4, 2)), probe, retrieval)
    line = reading_of(result)
    assert line.startswith("Languages mix") and "50 % of the time there vs 100 %" in line and "chance 50 %" in line
