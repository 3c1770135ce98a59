"""benchmarks.mining_scale (smoke run on synthetic vectors) and the mining pieces it added to mlse.evaluation."""

import json
import subprocess
import sys

import numpy as np
import pytest

from mlse.evaluation.index import l2_normalize, make_search
from mlse.evaluation.mining import (
    best_threshold,
    build_mining_task,
    mine_candidates,
    mining_prf,
    select_one_to_one,
    split_half_prf,
)
from tests.paths import REPO_ROOT as ROOT


def test_quick_benchmark_writes_a_complete_result(tmp_path):
    out = tmp_path / "scale.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.mining_scale",
            "--quick",
            "--sizes",
            "300,600",
            "--nprobe",
            "1,200",
            "--ef-search",
            "16,64",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "EXTRAPOLATION" in proc.stdout and "Growth" in proc.stdout
    res = json.loads(out.read_text())
    assert res["task"] == "mining-scale" and res["model"] == "synthetic"
    assert {"versions", "created", "config", "scores", "averages"} <= set(res)
    keys = set(res["scores"])
    for n, nlist in ((300, 69), (600, 98)):  # nlist = 4 * sqrt(N)
        assert {
            f"N={n} exact",
            f"N={n} ivf nprobe=1",
            f"N={n} ivf nprobe={nlist}",
            f"N={n} hnsw ef_search=16",
            f"N={n} hnsw ef_search=64",
        } <= keys
        assert res["scores"][f"N={n} exact"]["knn_recall"] == 1.0  # faiss flat vs the numpy oracle
        # nprobe=200 is clipped to nlist: every list visited, an exact search again
        assert res["scores"][f"N={n} ivf nprobe={nlist}"]["knn_recall"] == 1.0
        pool = res["pools"][str(n)]
        assert pool["n_per_side"] == n and pool["gold_pairs"] == n // 10
        assert pool["gold_fraction"] + pool["distractor_fraction"] == pytest.approx(1.0)
        assert sum(pool["src_distractors"].values()) == sum(pool["tgt_distractors"].values()) == n - n // 10
        for method in ("exact", "ivf", "hnsw"):
            worker = res["workers"][str(n)][method]
            assert worker["rss_peak_mb"] >= worker["rss_loaded_mb"] > 0
    for row in res["scores"].values():
        assert 0.0 <= row["F1_best"] <= 100.0 and 0.0 <= row["F1_heldout"] <= 100.0
        assert row["total_s"] >= row["search_s"] >= 0 and 0.0 <= row["knn_recall"] <= 1.0
    assert res["scores"]["N=600 exact"]["F1_best"] > 90  # gold pairs are near-copies in this synthetic task
    assert set(res["growth"]["exact"]["total"]) >= {"b", "c", "sizes", "seconds"}
    assert "EXTRAPOLATION" in res["extrapolation"]["basis"]


def _parallel(n: int) -> list[tuple[str, str]]:
    return [(f"src {i}", f"tgt {i}") for i in range(n)]


def test_build_mining_task_gold_candidates_and_src_share():
    parallel = _parallel(400)
    chosen = _parallel(60)  # gold may only come from these pairs
    train, test = build_mining_task(parallel, n_gold=40, seed=2, gold_candidates=chosen, src_share=0.25)
    gold = {(sp.src[i], sp.tgt[j]) for sp in (train, test) for i, j in sp.gold}
    assert len(gold) == 40 and gold <= set(chosen)
    all_src, all_tgt = set(train.src + test.src), set(train.tgt + test.tgt)
    # 360 remaining pairs (20 unused candidates among them): a quarter offer their source side, the rest the target.
    assert len(all_src) == 40 + 90 and len(all_tgt) == 40 + 270
    hidden = {(s, t) for s, t in parallel if s in all_src and t in all_tgt}
    assert hidden == gold  # no translation crosses the pools except gold
    # Without the new arguments the task is exactly what it was.
    assert build_mining_task(parallel, n_gold=40, seed=2) == build_mining_task(
        parallel, n_gold=40, seed=2, src_share=0.5
    )
    with pytest.raises(ValueError, match="src_share"):
        build_mining_task(parallel, n_gold=40, src_share=1.5)


def test_select_one_to_one_skips_empty_proposals():
    fwd_ids, fwd_sc = np.array([1, -1, 0]), np.array([1.3, -np.inf, 1.1], dtype=np.float32)
    bwd_ids, bwd_sc = np.array([2, 0]), np.array([1.2, 1.25], dtype=np.float32)
    cands = select_one_to_one(fwd_ids, fwd_sc, bwd_ids, bwd_sc)
    # src 1 proposed nothing; (0, 1) and (2, 0) were proposed both ways and keep their higher score.
    assert cands == [(0, 1, pytest.approx(1.3)), (2, 0, pytest.approx(1.2))]


def test_split_half_prf_tunes_on_one_half_and_scores_the_other():
    rng = np.random.default_rng(0)
    n = 400
    scores = rng.uniform(0.8, 1.4, n)
    gold = {(i, i) for i in range(n) if scores[i] > 1.1}  # a clean threshold exists at 1.1
    cands = [(i, i, float(scores[i])) for i in range(n)]
    res = split_half_prf(cands, gold, n, seed=1)
    assert res["tune_f1"] == pytest.approx(100.0) and res["f1"] > 98.0
    assert 1.05 < res["threshold"] < 1.15
    # Recompute by hand: the threshold comes from one half only, the scores from the other half only.
    half_a = set(np.random.default_rng(1).permutation(n)[: n // 2].tolist())
    tune = [c for c in cands if c[0] in half_a]
    threshold = best_threshold(tune, {g for g in gold if g[0] in half_a})
    assert res["threshold"] == threshold
    held = mining_prf([c for c in cands if c[0] not in half_a], {g for g in gold if g[0] not in half_a}, threshold)
    assert res["f1"] == pytest.approx(held["f1"]) and res["n_gold"] == sum(g[0] not in half_a for g in gold)


def test_mining_with_approximate_index_on_easy_task():
    rng = np.random.default_rng(5)
    base = rng.standard_normal((500, 24)).astype(np.float32)
    src = l2_normalize(base)
    tgt = l2_normalize(base + 0.1 * rng.standard_normal(base.shape).astype(np.float32))
    gold = {(i, i) for i in range(500)}
    for search in (make_search("ivf", nprobe=16), make_search("hnsw", ef_search=64)):
        cands = mine_candidates(src, tgt, k=4, candidates=8, search=search)
        assert mining_prf(cands, gold, best_threshold(cands, gold))["f1"] > 95
