"""The attribution heatmap's cell labels (mlse.ui.explain_figures): written in a unit scaled to the matrix, so a long
pair whose cells are all below 0.02 does not read 0.00 everywhere, and the unit is named in the title."""

from __future__ import annotations

import numpy as np

from mlse.ui.explain_figures import MAX_CELL_TEXT, attribution_heatmap, cell_labels, cell_scale


def test_the_scale_gives_the_largest_cell_two_significant_digits():
    assert cell_scale(np.array([[0.012, -0.004]])) == 1000
    assert cell_scale(np.array([[0.31, 0.02]])) == 100
    assert cell_scale(np.array([[-1.7, 0.2]])) == 10
    assert cell_scale(np.array([[12.0]])) == 1  # never scaled down
    assert cell_scale(np.zeros((2, 2))) == 1
    assert cell_scale(np.zeros((0, 0))) == 1
    assert cell_scale(np.array([[np.nan, 0.012]])) == 1000  # a missing cell does not decide the unit


def test_labels_are_whole_numbers_in_the_scaled_unit():
    z = np.array([[0.012, -0.0041], [0.0004, -0.0001]])
    assert cell_labels(z, 1000).tolist() == [["12", "-4"], ["0", "0"]]  # -0.1 is written "0", not "-0"


def test_a_long_pair_of_small_cells_is_labelled_x1000_not_0_00():
    words1, words2 = [f"a{i}" for i in range(8)], [f"b{j}" for j in range(9)]
    rng = np.random.default_rng(0)
    z = rng.uniform(-0.012, 0.012, size=(8, 9))
    z[0, 0] = 0.012
    fig = attribution_heatmap(words1, words2, z, "why")
    labels = np.asarray(fig.data[0].text)
    assert labels.shape == (8, 9) and labels[0, 0] == "12"
    assert np.mean(labels == "0") < 0.2, "most cells must show a digit other than 0"
    assert "attribution × 1,000" in fig.layout.title.text
    np.testing.assert_allclose(np.asarray(fig.data[0].z, dtype=float), z)  # colours and hovers keep the raw values


def test_no_cell_numbers_and_no_unit_when_the_cells_are_too_small_to_read():
    n = int(np.ceil(np.sqrt(MAX_CELL_TEXT))) + 1
    fig = attribution_heatmap([str(i) for i in range(n)], [str(j) for j in range(n)], np.full((n, n), 0.01), "why")
    assert fig.data[0].text is None and "numbers in the cells" not in fig.layout.title.text
