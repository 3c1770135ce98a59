"""mlse.scale.score without a cluster: the chunk pipeline gives api.score_pairs' columns bit for bit (texts repeated
across chunks included, where the embedding cache decides what is encoded), and a run stopped midway resumes from its
parts folder to the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

from mlse import api
from mlse.data.user_files import read_pairs
from mlse.models import load_model
from mlse.scale.engine import EngineOptions
from mlse.scale.pairs import PairSource
from mlse.scale.score import score_on_engine

S1 = ["Hallo Welt", "Guten Morgen", "Hallo Welt", "Wie geht es dir?", "Danke schön", "Guten Morgen", "Tschüss"]
S2 = ["Hello world", "Good morning", "Hi world", "How are you?", "Thanks a lot", "Good morning", "Hallo Welt"]


def _run(tiny_bert, tmp_path, parts, progress=None):
    path = tmp_path / "pairs.tsv"
    path.write_text("sentence1\tsentence2\n" + "".join(f"{a}\t{b}\n" for a, b in zip(S1, S2)), encoding="utf-8")
    chunks: list[dict[str, np.ndarray]] = []  # each chunk's columns, in order
    score_on_engine(
        [str(tiny_bert)],
        PairSource(read_pairs(path, chunk_rows=2)),
        backend="torch",
        options=EngineOptions("local"),
        job={"test": 1},
        parts=parts,
        progress=progress,
        emit=lambda _index, _chunk, columns: chunks.append(columns),
    )
    return {key: np.concatenate([c[key] for c in chunks]) for key in chunks[0]}


def test_the_pipeline_equals_score_pairs_bit_for_bit(tiny_bert, tmp_path, monkeypatch):
    ours = _run(tiny_bert, tmp_path, tmp_path / "parts")
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "fresh-cache"))  # the local engine from an empty cache too
    frame = api.score_pairs(list(zip(S1, S2)), {str(tiny_bert): load_model(str(tiny_bert))}, chunk=2)
    expected = {key: frame[key].to_numpy() for key in frame.attrs["run"].columns}
    assert list(ours) == list(expected)
    for key in expected:
        assert np.array_equal(ours[key], expected[key]), key


def test_a_stopped_run_resumes_from_its_parts(tiny_bert, tmp_path, monkeypatch):
    def stop_after_two(done, total):
        if done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(tiny_bert, tmp_path, tmp_path / "parts", progress=stop_after_two)
    assert len(list((tmp_path / "parts").glob("shard-*.npz"))) == 2
    resumed = _run(tiny_bert, tmp_path, tmp_path / "parts")
    monkeypatch.setenv("MLSE_CACHE", str(tmp_path / "fresh-cache"))
    whole = _run(tiny_bert, tmp_path, None)
    for key in whole:
        assert np.array_equal(resumed[key], whole[key]), key
