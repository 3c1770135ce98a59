"""How mixed the languages are on a 2-D map, and where to draw each language so that mixing shows.

* :func:`ring_offsets`: translations sharing one spot would hide all but the last language drawn, so each language is
  shifted by a small fixed vector in its own direction, showing a ring of colours; the map's shape is unchanged.
* :func:`neighbour_mixing`: the mean share of a point's ``k`` nearest map neighbours in another language;
  :func:`mixed_share` is its value for perfectly mixed languages. Language panel: near 0; meaning panel: near mixed.
"""

from __future__ import annotations

import numpy as np

RING_SHARE = 0.012  # the ring's radius as a share of the map's extent: visible around a point, small beside clusters
NEIGHBOURS = 10


def ring_offsets(n_langs: int, coords: np.ndarray, share: float = RING_SHARE) -> np.ndarray:
    """[n_langs, 2] display offsets: language ``i`` at angle 2 pi i / n_langs, radius ``share`` x the extent."""
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, 2)  # [N, 2]
    extent = float(np.ptp(coords, axis=0).max()) if len(coords) else 0.0
    if n_langs < 2 or extent == 0.0:
        return np.zeros((max(n_langs, 0), 2))
    angles = 2 * np.pi * np.arange(n_langs) / n_langs + np.pi / 2  # the first language on top
    return share * extent * np.stack([np.cos(angles), np.sin(angles)], axis=1)


def neighbour_mixing(coords: np.ndarray, lang_idx: np.ndarray, k: int = NEIGHBOURS) -> float | None:
    """Mean share of each point's ``k`` nearest map neighbours that are in another language (None: < 2 points)."""
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, 2)  # [N, 2]
    lang_idx = np.asarray(lang_idx)
    n = len(coords)
    if n < 2:
        return None
    k = min(k, n - 1)
    dist = ((coords[:, None, :] - coords[None, :, :]) ** 2).sum(-1)  # [N, N]
    np.fill_diagonal(dist, np.inf)
    nearest = np.argpartition(dist, k - 1, axis=1)[:, :k]  # [N, k] (ties in any order)
    return float(np.mean(lang_idx[nearest] != lang_idx[:, None]))


def mixed_share(lang_idx: np.ndarray) -> float | None:
    """:func:`neighbour_mixing` of perfectly mixed languages: for each point, the share of the *other* points in
    another language, averaged (None: < 2 points)."""
    lang_idx = np.asarray(lang_idx)
    n = len(lang_idx)
    if n < 2:
        return None
    counts = np.bincount(lang_idx)
    same_others = counts[lang_idx] - 1  # [N] other points of the point's own language
    return float(np.mean(1 - same_others / (n - 1)))
