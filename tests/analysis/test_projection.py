"""mlse.analysis.projection: the FLORES sample, the two metrics on embeddings with known answers, and the disk cache."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from mlse.analysis.projection import (
    flores_sample,
    language_id_accuracy,
    language_map,
    project_2d_explained,
    projection_dir,
    retrieval_at1,
)
from mlse.data import load_flores
from mlse.errors import DataError, MlseError
from mlse.single_flight import held_keys
from tests.fake_encoder import FakeEncoder

L, N, D = 3, 12, 16


def _labels(n_langs: int = L, n: int = N) -> tuple[np.ndarray, np.ndarray]:
    """Language-major layout as in a Sample: (lang_idx [L*n], sentence_ids [L*n])."""
    return np.repeat(np.arange(n_langs), n), np.tile(np.arange(100, 100 + n), n_langs)


def _meanings(n: int = N, d: int = D, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, d)).astype(np.float32)  # [n, d]


# -- metrics with known answers -------------------------------------------------------------------------------------
def test_identical_translations_retrieve_perfectly_and_hide_the_language():
    lang_idx, sids = _labels()
    X = np.tile(_meanings(), (L, 1))  # [L*N, D]: a sentence's translations are the same vector
    assert retrieval_at1(X, lang_idx, sids) == 1.0
    # the three languages of one sentence are one point: a probe can only be right for one of them
    assert language_id_accuracy(X, lang_idx, sids) == pytest.approx(1 / L)


def test_language_separable_space_gives_a_perfect_probe():
    lang_idx, sids = _labels()
    one_hot = np.eye(L, dtype=np.float32)[lang_idx] * 3  # [L*N, L]
    noise = np.random.default_rng(1).normal(scale=0.05, size=(L * N, D)).astype(np.float32)
    X_lang = np.hstack([one_hot, noise])  # language only, no meaning shared between translations
    assert language_id_accuracy(X_lang, lang_idx, sids) == 1.0
    X_both = np.hstack([one_hot, np.tile(_meanings(), (L, 1))])  # language + meaning
    assert language_id_accuracy(X_both, lang_idx, sids) == 1.0
    assert retrieval_at1(X_both, lang_idx, sids) == 1.0


def test_collapsed_space_scores_chance_not_perfect():
    lang_idx, sids = _labels()
    X = np.ones((L * N, D), dtype=np.float32)
    assert retrieval_at1(X, lang_idx, sids) == pytest.approx(1 / N)  # ties go to the first candidate


def test_metrics_need_two_languages():
    lang_idx, sids = _labels(n_langs=1)
    X = _meanings()
    assert retrieval_at1(X, lang_idx, sids) is None
    assert language_id_accuracy(X, lang_idx, sids) is None


# -- projection -----------------------------------------------------------------------------------------------------
def test_pca_projection_shapes_and_tiny_inputs():
    X = _meanings(20)
    coords, _ = project_2d_explained(X, method="pca")
    assert coords.shape == (20, 2) and np.isfinite(coords).all() and coords.std() > 0
    assert project_2d_explained(X[:1], method="umap")[0].shape == (1, 2)  # too few points for UMAP: PCA, no crash
    with pytest.raises(MlseError, match="unknown projection method"):
        project_2d_explained(X, method="tsne")


@pytest.mark.slow
def test_umap_projection_is_deterministic():
    X = _meanings(60)
    (a, _), (b, _) = project_2d_explained(X, method="umap", seed=3), project_2d_explained(X, method="umap", seed=3)
    assert a.shape == (60, 2) and np.isfinite(a).all()
    np.testing.assert_allclose(a, b)


# -- the sample -----------------------------------------------------------------------------------------------------
def test_flores_sample_is_aligned_and_seeded(data_dir):
    s = flores_sample(["en", "de"], 5, data_dir=data_dir, seed=7)
    assert s.langs == ["eng_Latn", "deu_Latn"] and s.n == 5 and len(s.texts) == 10
    flores = load_flores(["eng_Latn", "deu_Latn"], data_dir)
    for k, text in enumerate(s.texts):
        assert text == flores[s.langs[s.lang_idx[k]]][s.sentence_ids[k]]
    assert s.text("deu_Latn", int(s.ids[2])) == flores["deu_Latn"][s.ids[2]]
    np.testing.assert_array_equal(flores_sample(["en", "de"], 5, data_dir=data_dir, seed=7).ids, s.ids)
    assert flores_sample(["en"], 5000, data_dir=data_dir).n == len(flores["eng_Latn"])  # capped at the corpus


def test_bad_sample_requests_are_user_errors(tmp_path, monkeypatch, data_dir):
    with pytest.raises(MlseError, match="at least one language"):
        flores_sample([], 10, data_dir=data_dir)
    with pytest.raises(DataError, match="unknown FLORES language"):
        flores_sample(["klingon"], 10, data_dir=data_dir)
    monkeypatch.setenv("MLSE_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="does not exist"):
        flores_sample(["en"], 10)


# -- the map and its cache ------------------------------------------------------------------------------------------
def test_second_call_is_served_from_the_cache_without_encoding(data_dir):
    enc = FakeEncoder()
    steps = []
    first = language_map(
        enc, ["en", "fr", "de"], 8, data_dir=data_dir, method="pca", progress=lambda f, m: steps.append(f)
    )
    assert enc.calls == 1 and list(first.views) == ["raw"] and not first.views["raw"].from_cache
    assert steps[0] == 0.0 and steps[-1] == 1.0 and steps == sorted(steps)
    files = sorted(os.listdir(projection_dir()))
    assert len(files) == 1 and files[0].endswith(".npz")  # no temporary files left behind
    again = language_map(enc, ["en", "fr", "de"], 8, data_dir=data_dir, method="pca")
    assert enc.calls == 1 and again.views["raw"].from_cache
    np.testing.assert_array_equal(again.views["raw"].coords, first.views["raw"].coords)
    assert again.views["raw"].lang_id_accuracy == first.views["raw"].lang_id_accuracy
    assert again.views["raw"].retrieval_at1 == first.views["raw"].retrieval_at1
    # any change to the key recomputes: another seed, another model identity
    language_map(enc, ["en", "fr", "de"], 8, data_dir=data_dir, method="pca", seed=1)
    assert enc.calls == 2
    other = FakeEncoder(identity="fake:v2")
    language_map(other, ["en", "fr", "de"], 8, data_dir=data_dir, method="pca")
    assert other.calls == 1 and len(os.listdir(projection_dir())) == 3


def test_damaged_cache_file_is_recomputed(data_dir):
    enc = FakeEncoder()
    language_map(enc, ["en", "de"], 6, data_dir=data_dir, method="pca")
    (path,) = projection_dir().iterdir()
    path.write_bytes(b"not an npz")
    view = language_map(enc, ["en", "de"], 6, data_dir=data_dir, method="pca").views["raw"]
    assert enc.calls == 2 and not view.from_cache and view.coords.shape == (12, 2)


def test_plain_encoder_has_only_the_raw_space(data_dir):
    with pytest.raises(MlseError, match="no meaning"):
        language_map(FakeEncoder(), ["en", "de"], 4, data_dir=data_dir, method="pca", spaces=["raw", "meaning"])


def test_import_does_not_load_umap_or_gradio():
    code = "import sys, mlse.analysis.projection; print('umap' in sys.modules, 'gradio' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()
    assert out == "False False"


def test_the_same_map_asked_twice_at_once_is_computed_once(data_dir):
    """A press and the warm start (or two visitors) asking for the same map: the second waits and reads the first's
    cache files, encoding nothing."""
    started, release = threading.Event(), threading.Event()

    class Held(FakeEncoder):  # the first request's encode waits until the second one is waiting too
        def encode(self, texts, **kwargs):
            started.set()
            assert release.wait(30)
            return super().encode(texts, **kwargs)

    enc = Held()
    results, messages = {}, []
    first = threading.Thread(
        target=lambda: results.setdefault(1, language_map(enc, ["en", "de"], 6, data_dir=data_dir, method="pca"))
    )
    first.start()
    assert started.wait(30)
    second = threading.Thread(
        target=lambda: results.setdefault(
            2,
            language_map(
                enc, ["en", "de"], 6, data_dir=data_dir, method="pca", progress=lambda f, m: messages.append(m)
            ),
        )
    )
    second.start()
    deadline = time.monotonic() + 30
    while not any("waiting" in m for m in messages) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert any("being computed for another request" in m for m in messages)
    release.set()
    first.join(30)
    second.join(30)
    assert enc.calls == 1  # encoded once, for both
    assert not results[1].views["raw"].from_cache and results[2].views["raw"].from_cache
    np.testing.assert_array_equal(results[1].views["raw"].coords, results[2].views["raw"].coords)
    # a different map is not held up by this one's lock, and the lock table is emptied
    language_map(enc, ["en", "fr"], 6, data_dir=data_dir, method="pca")
    assert enc.calls == 2 and not held_keys()
