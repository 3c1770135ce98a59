"""mlse.analysis.map_mixing on hand-made maps: the ring that shows every language of a shared point, and the share
of neighbours in another language."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.analysis.map_mixing import mixed_share, neighbour_mixing, ring_offsets


def test_translations_on_one_point_become_a_ring_of_distinct_positions():
    coords = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 5.0]])
    offsets = ring_offsets(8, coords, share=0.01)
    assert offsets.shape == (8, 2)
    assert np.allclose(np.linalg.norm(offsets, axis=1), 0.1)  # 1 % of the extent, 10
    shown = coords[0] + offsets  # the same point in eight languages
    assert len({tuple(np.round(p, 6)) for p in shown}) == 8
    assert offsets[0] == pytest.approx([0.0, 0.1])  # the first language on top
    assert not ring_offsets(1, coords).any() and not ring_offsets(3, np.zeros((4, 2))).any()


def test_mixing_is_zero_for_separate_clusters_and_near_the_mixed_share_when_languages_overlap():
    rng = np.random.default_rng(0)
    lang = np.repeat([0, 1, 2, 3], 50)
    separate = rng.normal(size=(200, 2)) * 0.1 + lang[:, None] * 10.0
    assert neighbour_mixing(separate, lang) == 0.0
    overlapping = rng.normal(size=(200, 2))
    assert mixed_share(lang) == pytest.approx(1 - 49 / 199)
    assert neighbour_mixing(overlapping, lang) == pytest.approx(mixed_share(lang), abs=0.08)
    assert neighbour_mixing(np.zeros((1, 2)), [0]) is None and mixed_share([0]) is None
