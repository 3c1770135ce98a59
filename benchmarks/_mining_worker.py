"""One worker of ``benchmarks.mining_scale``: the task of one size mined with one index kind (exact, IVF or HNSW) over
all its sweep settings, in a fresh interpreter so that its peak RSS (VmHWM, ``mlse.serving.procmem``) is that index's
alone.

:func:`spawn_worker` starts ``python -m benchmarks.mining_scale --worker METHOD`` and reads its result; that process
runs :func:`run_worker`: per setting the index build and search (both directions), the margin, the 1:1 selection, the
recall of the candidate lists against exact kNN and the F1 at the oracle and at a held-out threshold. A helper module
of that benchmark (no ``main``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from mlse.evaluation.index import build_hnsw, build_ivf, default_nlist, knn, knn_numpy, recall_at_k, search_index
from mlse.evaluation.margin import margin_both_ways
from mlse.evaluation.mining import best_threshold, mining_prf, select_one_to_one, split_half_prf
from mlse.serving.procmem import peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]


def searches(method: str, src: np.ndarray, tgt: np.ndarray, depth: int, args):
    """Yield (params, build_s, search_s, fwd, bwd) per sweep setting; one index per side is built once per method.

    fwd = src searched in tgt, bwd = tgt searched in src, each (sims [N, depth], ids [N, depth]).
    """
    if method == "exact":
        t0 = time.perf_counter()
        fwd, bwd = knn(src, tgt, depth), knn(tgt, src, depth)
        yield {}, 0.0, time.perf_counter() - t0, fwd, bwd
        return
    t0 = time.perf_counter()
    if method == "ivf":
        nlist = default_nlist(min(len(src), len(tgt)))
        on_tgt, on_src = build_ivf(tgt, nlist, seed=args.seed), build_ivf(src, nlist, seed=args.seed)
        # nprobe beyond nlist means "visit every list" (an exact search): clip it, and say so in the key
        sweep = [("nprobe", p) for p in sorted({min(p, nlist) for p in ints(args.nprobe)})]
        fixed = {"nlist": nlist}
    else:
        on_tgt = build_hnsw(tgt, args.hnsw_m, args.ef_construction)
        on_src = build_hnsw(src, args.hnsw_m, args.ef_construction)
        sweep = [("ef_search", e) for e in ints(args.ef_search)]
        fixed = {"m": args.hnsw_m, "ef_construction": args.ef_construction}
    build_s = time.perf_counter() - t0
    for name, value in sweep:
        t0 = time.perf_counter()
        fwd = search_index(on_tgt, src, depth, **{name: value})
        bwd = search_index(on_src, tgt, depth, **{name: value})
        yield {**fixed, name: value}, build_s, time.perf_counter() - t0, fwd, bwd


def mine_and_score(fwd, bwd, gold: set, n_src: int, args) -> dict:
    """Margin, 1:1 selection, then F1 at the oracle threshold and at one tuned on a held-out half."""
    t0 = time.perf_counter()
    proposals = margin_both_ways(fwd, bwd, args.k, args.candidates)
    margin_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    cands = select_one_to_one(*proposals)
    select_s = time.perf_counter() - t0
    best = mining_prf(cands, gold, best_threshold(cands, gold))
    held = split_half_prf(cands, gold, n_src, seed=args.seed)
    return {
        "margin_s": margin_s,
        "select_s": select_s,
        "candidates_mined": len(cands),
        "f1_best": best["f1"],
        "p_best": best["precision"],
        "r_best": best["recall"],
        "f1_heldout": held["f1"],
        "p_heldout": held["precision"],
        "r_heldout": held["recall"],
        "threshold_heldout": held["threshold"],
    }


def oracle_recall(
    src: np.ndarray,
    tgt: np.ndarray,
    fwd_ids: np.ndarray,
    bwd_ids: np.ndarray,
    depth: int,
    seed: int,
    sample: int = 1000,
) -> float:
    """Recall of the exact faiss search against the numpy brute-force oracle on a sample of queries per direction
    (all of them would cost as much as the search itself)."""
    rng = np.random.default_rng(seed)
    recalls = []
    for queries, base, ids in ((src, tgt, fwd_ids), (tgt, src, bwd_ids)):
        rows = np.sort(rng.choice(len(queries), size=min(sample, len(queries)), replace=False))
        recalls.append(recall_at_k(ids[rows], knn_numpy(queries[rows], base, depth)[1]))
    return float(np.mean(recalls))


def run_worker(args) -> None:
    """Mine one task with one index kind (all its sweep settings); write result-<method>.json in the workdir."""
    import faiss

    faiss.omp_set_num_threads(args.threads)
    work = Path(args.workdir)
    rss_start = peak_rss_mb()
    src, tgt = np.load(work / "src.npy"), np.load(work / "tgt.npy")  # [N, d] each
    gold = {(int(i), int(j)) for i, j in np.load(work / "gold.npy")}
    rss_loaded = peak_rss_mb()
    depth = max(args.k, args.candidates)
    exact_ids = None if args.worker == "exact" else (np.load(work / "exact_fwd.npy"), np.load(work / "exact_bwd.npy"))
    rows = []
    for params, build_s, search_s, fwd, bwd in searches(args.worker, src, tgt, depth, args):
        if exact_ids is None:  # the exact run is the ground truth the approximate runs are measured against
            np.save(work / "exact_fwd.npy", fwd[1])
            np.save(work / "exact_bwd.npy", bwd[1])
            knn_recall = None  # measured against the numpy oracle below, once the peak RSS is taken
        else:
            knn_recall = (recall_at_k(fwd[1], exact_ids[0]) + recall_at_k(bwd[1], exact_ids[1])) / 2
        scores = mine_and_score(fwd, bwd, gold, len(src), args)
        total = build_s + search_s + scores["margin_s"] + scores["select_s"]
        rows.append(
            {
                "method": args.worker,
                "params": params,
                "build_s": build_s,
                "search_s": search_s,
                "total_s": total,
                "knn_recall": knn_recall,
                **scores,
            }
        )
    rss_peak = peak_rss_mb()
    if exact_ids is None:
        exact_fwd, exact_bwd = np.load(work / "exact_fwd.npy"), np.load(work / "exact_bwd.npy")
        rows[0]["knn_recall"] = oracle_recall(src, tgt, exact_fwd, exact_bwd, depth, args.seed)
    out = {
        "rows": rows,
        "rss_start_mb": rss_start,
        "rss_loaded_mb": rss_loaded,
        "rss_peak_mb": rss_peak,
        "threads": args.threads,
        "depth": depth,
        "rss_note": "peak of the whole worker: embeddings of both sides, gold pairs, the index(es), search "
        "buffers; approximate workers also hold the exact ids (2 x N x depth int64) for recall",
    }
    (work / f"result-{args.worker}.json").write_text(json.dumps(out))


def spawn_worker(method: str, work: Path, args) -> dict:
    """Run one worker in a fresh interpreter (its peak RSS is then this method's alone) and read its result."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.mining_scale",
        "--worker",
        method,
        "--workdir",
        str(work),
        "--k",
        str(args.k),
        "--candidates",
        str(args.candidates),
        "--nprobe",
        args.nprobe,
        "--ef-search",
        args.ef_search,
        "--hnsw-m",
        str(args.hnsw_m),
        "--ef-construction",
        str(args.ef_construction),
        "--threads",
        str(args.threads),
        "--seed",
        str(args.seed),
    ]
    threads = str(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)  # -m finds benchmarks here
    if proc.returncode != 0:
        raise SystemExit(f"worker {method} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads((work / f"result-{method}.json").read_text())
    result["wall_s"] = time.perf_counter() - t0
    return result


def ints(text: str) -> list[int]:
    """A comma-separated list of integers (``--sizes``, ``--nprobe``, ``--ef-search``)."""
    return [int(x) for x in str(text).split(",") if x.strip()]
