"""mlse.scale.engine and mlse.scale.work without a cluster: which engine a job gets, the options refused, the batch
bound of --batch-tokens, and the local engine's results for a chunk list given out of order."""

from __future__ import annotations

import numpy as np
import pytest

from mlse.errors import MlseError
from mlse.scale.engine import AUTO_RAY_ROWS, EngineOptions, Workers, run_chunks
from mlse.scale.work import WorkSpec, batch_size


def test_auto_is_local_below_the_threshold_and_ray_with_an_address():
    assert EngineOptions().resolve(10) == "local"
    assert EngineOptions().resolve(AUTO_RAY_ROWS) == "ray"
    assert EngineOptions(address="10.0.0.1:6379").resolve(10) == "ray"
    assert EngineOptions("local").resolve(10**9) == "local"


@pytest.mark.parametrize("kwargs", [{"engine": "spark"}, {"workers": 0}, {"engine": "local", "address": "x:1"}])
def test_bad_engine_options_are_refused(kwargs):
    with pytest.raises(MlseError):
        EngineOptions(**kwargs)


def test_batch_tokens_bound_the_texts_of_a_forward_pass():
    assert batch_size(["a" * 400], None) == 64
    assert batch_size(["a" * 400, "b"], 1020) == 10  # the longest text: 400 / 4 + 2 = 102 tokens
    assert batch_size(["a" * 4000], 10) == 1
    with pytest.raises(MlseError):
        WorkSpec("embed", ("m",), "torch", batch_tokens=0)


def test_local_engine_scores_chunks_like_similarity(tiny_bert):
    from mlse.models import load_model

    s1, s2 = ["Hallo", "Guten Tag", "Danke"], ["Hello", "Good day", "Thanks"]
    spec = WorkSpec("score", (str(tiny_bert),), "torch")
    seen = []
    workers = Workers(check=seen.append)
    chunks = iter([(1, (s1[2:], s2[2:])), (0, (s1[:2], s2[:2]))])  # a generator is taken one chunk at a time
    results = dict(run_chunks(spec, chunks, EngineOptions("local"), rows=3, workers=workers))
    model = load_model(str(tiny_bert))
    cos, _ = model.similarity(s1[:2], s2[:2])
    assert np.array_equal(results[0][f"{tiny_bert} cosine"], cos) and len(seen) == 1
    (entry,) = workers.summary()  # this process ran both chunks, and its peak memory is known
    assert entry["chunks"] == 2 and entry["peak_rss_mib"] > 0 and seen[0] == {str(tiny_bert): model.identity}


def test_a_cpu_actor_gets_its_share_of_the_cores_at_most_mlse_threads(monkeypatch):
    from mlse.scale.engine import _threads

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    monkeypatch.delenv("MLSE_THREADS", raising=False)
    assert _threads({"CPU": 8.0}, 1, 0) == 8
    assert _threads({"CPU": 8.0}, 3, 0) == 2
    assert _threads({"CPU": 8.0}, 1, 1) is None  # a GPU actor
    monkeypatch.setenv("MLSE_THREADS", "1")
    assert _threads({"CPU": 8.0}, 1, 0) == 1  # one worker on one core: what worker scaling is measured against


def test_a_worker_given_threads_hands_them_to_its_onnx_sessions(tiny_bert, monkeypatch):
    from mlse.encoders.threads import default_threads
    from mlse.scale.work import ChunkWorker

    monkeypatch.setenv("MLSE_THREADS", "2")
    ChunkWorker(WorkSpec("embed", (str(tiny_bert),), "torch"), threads=1)
    assert default_threads() == 1  # before: every ONNX session of every actor kept 2 threads, oversubscribing the cores
