"""Margin-based bitext mining at scale: exact vs approximate (IVF, HNSW) nearest-neighbour search, N up to 100k.

    python benchmarks/mining_scale.py --sizes 10000,30000,100000 [--model runs/minilm-multi-mse60]
    python benchmarks/mining_scale.py --quick            # synthetic embeddings, seconds (the smoke test runs this)

The task, per N: two pools of N sentences each, a source pool (non-English) and a target pool (English). A fraction
(--gold-fraction, 10 % by default) are gold translation pairs from Tatoeba-Challenge X-English (12 languages,
standard scripts); the rest are distractors with no translation on the other side: Tatoeba sentences (Challenge and
the LASER test set's 112 languages) whose translations were kept out of the opposite pool, STS Multi MT English
sentences, and FLORES-200 / WMT halves (one half gives English, the other half another language).
`mlse.evaluation.mining.build_mining_task` does the checks (no exact duplicates, no known translation across the pools
except gold). The pools for the smaller N are prefixes of the largest one, so its embeddings are reused from the cache.

Mining is LASER's (`mine_candidates`): ratio margin over k nearest neighbours both ways, best candidate forward and
backward, union, greedy 1:1. It runs once per index: exact (faiss.IndexFlatIP), IVF (IndexIVFFlat, nlist ~ 4*sqrt(N),
nprobe sweep) and HNSW (IndexHNSWFlat, efSearch sweep), each in a fresh subprocess so its peak RSS (ru_maxrss) is its
own. Reported per setting: index build, search (both directions), margin and 1:1 selection times, recall@depth of the
candidate lists against exact kNN, F1 at the best threshold (oracle) and at a threshold tuned on a held-out half of the
source sentences (`split_half_prf`). Times are fitted as t = c * N^b (log-log least squares) and extrapolated -- the
extrapolations are labelled as such in the output.

Writes one JSON (EvalResult schema plus "pools", "encode", "growth", "extrapolation") atomically to --out (--quick
without --out: a temporary folder, never results/). The task and its encoding live in ``benchmarks/_mining_pool.py``,
the growth fits, extrapolation and output in ``benchmarks/_mining_report.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._mining_pool import composition, encode_task, real_pool, synthetic_pool, take  # noqa: E402
from benchmarks._mining_report import extrapolate, growth, print_report, table_rows, write_result  # noqa: E402
from benchmarks.common import output_file  # noqa: E402
from mlse.evaluation.index import (  # noqa: E402
    build_hnsw,
    build_ivf,
    default_nlist,
    knn,
    knn_numpy,
    recall_at_k,
    search_index,
)
from mlse.evaluation.margin import margin_both_ways  # noqa: E402
from mlse.evaluation.mining import best_threshold, mining_prf, select_one_to_one, split_half_prf  # noqa: E402
from mlse.serving.procmem import peak_rss_mb  # noqa: E402

STUDENT_RUN = ROOT / "runs" / "minilm-multi-mse60"
METHODS = ("exact", "ivf", "hnsw")


# -- one worker: one index kind, a fresh process ---------------------------------------------------------------------


def _searches(method: str, src: np.ndarray, tgt: np.ndarray, depth: int, args):
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
        sweep = [("nprobe", p) for p in sorted({min(p, nlist) for p in _ints(args.nprobe)})]
        fixed = {"nlist": nlist}
    else:
        on_tgt = build_hnsw(tgt, args.hnsw_m, args.ef_construction)
        on_src = build_hnsw(src, args.hnsw_m, args.ef_construction)
        sweep = [("ef_search", e) for e in _ints(args.ef_search)]
        fixed = {"m": args.hnsw_m, "ef_construction": args.ef_construction}
    build_s = time.perf_counter() - t0
    for name, value in sweep:
        t0 = time.perf_counter()
        fwd = search_index(on_tgt, src, depth, **{name: value})
        bwd = search_index(on_src, tgt, depth, **{name: value})
        yield {**fixed, name: value}, build_s, time.perf_counter() - t0, fwd, bwd


def _mine_and_score(fwd, bwd, gold: set, n_src: int, args) -> dict:
    """Margin, 1:1 selection, then F1 at the oracle threshold and at one tuned on a held-out half."""
    t0 = time.perf_counter()
    proposals = margin_both_ways(fwd, bwd, args.k, args.candidates)
    margin_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    cands = select_one_to_one(*proposals)
    select_s = time.perf_counter() - t0
    best = mining_prf(cands, gold, best_threshold(cands, gold))
    held = split_half_prf(cands, gold, n_src, seed=args.seed)
    return {"margin_s": margin_s, "select_s": select_s, "candidates_mined": len(cands),
            "f1_best": best["f1"], "p_best": best["precision"], "r_best": best["recall"],
            "f1_heldout": held["f1"], "p_heldout": held["precision"], "r_heldout": held["recall"],
            "threshold_heldout": held["threshold"]}  # fmt: skip


def _oracle_recall(
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
    for params, build_s, search_s, fwd, bwd in _searches(args.worker, src, tgt, depth, args):
        if exact_ids is None:  # the exact run is the ground truth the approximate runs are measured against
            np.save(work / "exact_fwd.npy", fwd[1])
            np.save(work / "exact_bwd.npy", bwd[1])
            knn_recall = None  # measured against the numpy oracle below, once the peak RSS is taken
        else:
            knn_recall = (recall_at_k(fwd[1], exact_ids[0]) + recall_at_k(bwd[1], exact_ids[1])) / 2
        scores = _mine_and_score(fwd, bwd, gold, len(src), args)
        total = build_s + search_s + scores["margin_s"] + scores["select_s"]
        rows.append({"method": args.worker, "params": params, "build_s": build_s, "search_s": search_s,
                     "total_s": total, "knn_recall": knn_recall, **scores})  # fmt: skip
    rss_peak = peak_rss_mb()
    if exact_ids is None:
        exact_fwd, exact_bwd = np.load(work / "exact_fwd.npy"), np.load(work / "exact_bwd.npy")
        rows[0]["knn_recall"] = _oracle_recall(src, tgt, exact_fwd, exact_bwd, depth, args.seed)
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
    """Run one worker in a fresh interpreter (its ru_maxrss is then this method's alone) and read its result."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", method, "--workdir", str(work),
           "--k", str(args.k), "--candidates", str(args.candidates), "--nprobe", args.nprobe,
           "--ef-search", args.ef_search, "--hnsw-m", str(args.hnsw_m), "--ef-construction",
           str(args.ef_construction), "--threads", str(args.threads), "--seed", str(args.seed)]  # fmt: skip
    threads = str(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": threads, "OPENBLAS_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"worker {method} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    result = json.loads((work / f"result-{method}.json").read_text())
    result["wall_s"] = time.perf_counter() - t0
    return result


# -- main -------------------------------------------------------------------------------------------------------------


def _ints(text: str) -> list[int]:
    return [int(x) for x in str(text).split(",") if x.strip()]


def parse_args(argv=None):
    default_model = str(STUDENT_RUN) if (STUDENT_RUN / "model").is_dir() else "minilm-en"
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default=None, help="sentences per side, comma-separated (default 10000,30000,100000; "
                   "--quick: 300,600)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="synthetic clustered embeddings, no model, no data")
    p.add_argument("--encode-only", action="store_true", help="build the pools and fill the embedding cache, then stop")
    p.add_argument("--model", default=default_model, help="encoder (default: the multilingual student if present)")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--gold-fraction", type=float, default=0.1)
    p.add_argument("--k", type=int, default=4, help="margin neighbourhood size")
    p.add_argument("--candidates", type=int, default=16, help="cosine shortlist re-ranked by margin")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--nprobe", default="1,4,16,64", help="IVF sweep (nlist = 4*sqrt(N))")
    p.add_argument("--ef-search", default="16,32,64,128", help="HNSW sweep")
    p.add_argument("--hnsw-m", type=int, default=32)
    p.add_argument("--ef-construction", type=int, default=64)
    p.add_argument("--threads", type=int, default=2, help="faiss / BLAS threads in the workers")
    p.add_argument(
        "--encode-threads",
        type=int,
        default=None,
        help="torch threads for encoding (default torch's; 1 is faster on a CPU shared with other jobs)",
    )
    p.add_argument("--gpu-tflops", type=float, default=20.0, help="ASSUMED effective GPU throughput (extrapolation)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="result JSON (default results/mining-scale/mining-scale-<model>.json; "
                   "--quick: in a temporary folder)")  # fmt: skip
    p.add_argument("--worker", choices=METHODS, help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.sizes = args.sizes or ("300,600" if args.quick else "10000,30000,100000")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        run_worker(args)
        return
    sizes = sorted(set(_ints(args.sizes)))
    methods = [m for m in METHODS if m in args.methods.split(",")]  # exact first: the others' recall needs it
    if "exact" not in methods or set(args.methods.split(",")) - set(METHODS):
        raise SystemExit(f"--methods: a comma-separated subset of {', '.join(METHODS)} that includes exact")
    started = time.perf_counter()
    load_start = os.getloadavg()
    if args.quick:
        pool, syn_src, syn_tgt = synthetic_pool(sizes[-1], args.gold_fraction, args.seed)
        model, identity, encoder, data = "synthetic", "synthetic clustered vectors, d=32", None, {}
    else:
        from mlse.data import file_sha256
        from mlse.data.portable import portable_path
        from mlse.models import load_model

        t0 = time.perf_counter()
        pool = real_pool(sizes[-1], args.gold_fraction, args.seed, args.data_dir)
        print(f"pool for N <= {sizes[-1]:,} built in {time.perf_counter() - t0:.0f} s: {len(pool.gold):,} gold, "
              f"{len(pool.src_extra):,} / {len(pool.tgt_extra):,} src / tgt distractors", flush=True)  # fmt: skip
        encoder = load_model(args.model)
        if args.encode_threads:
            import torch

            torch.set_num_threads(args.encode_threads)
        model, identity = args.model.removeprefix(str(ROOT) + "/"), encoder.identity
        data = {portable_path(p, args.data_dir): file_sha256(p) for p in sorted(set(map(Path, pool.sources)))}
    results = {"pools": {}, "encode": {}, "workers": {}, "table": {}}
    rows_by_n: dict[int, list[dict]] = {}
    dim = 0
    with tempfile.TemporaryDirectory(prefix="mining-scale-") as tmp:
        for n in sizes:
            task = take(pool, n, args.gold_fraction, args.seed)
            results["pools"][n] = composition(pool, task)
            print(f"N={n:,}: encoding {2 * n:,} texts", flush=True)
            if encoder is None:
                src = syn_src[[i for _, i in task.src]]
                tgt = syn_tgt[[i for _, i in task.tgt]]
                results["encode"][n] = {"encode_s": 0.0, "texts": 2 * n, "from_cache": False, "synthetic": True}
            else:
                src, tgt, results["encode"][n] = encode_task(encoder, task)
                if args.encode_only:
                    print(f"N={n:,}: {results['encode'][n]}")
                    continue
            dim = src.shape[1]
            work = Path(tmp) / f"n{n}"
            work.mkdir()
            np.save(work / "src.npy", np.ascontiguousarray(src, dtype=np.float32))
            np.save(work / "tgt.npy", np.ascontiguousarray(tgt, dtype=np.float32))
            np.save(work / "gold.npy", np.array(sorted(task.gold), dtype=np.int64).reshape(-1, 2))
            del src, tgt
            rows_by_n[n], results["workers"][n], results["table"][n] = [], {}, []
            for method in methods:
                print(f"N={n:,}: mining with {method}", flush=True)
                worker = spawn_worker(method, work, args)
                rows_by_n[n] += worker["rows"]
                results["workers"][n][method] = {k: v for k, v in worker.items() if k != "rows"} | {
                    "rows": worker["rows"]
                }
                results["table"][n] += table_rows(n, worker["rows"], worker)
            for f in work.glob("*.npy"):
                f.unlink()  # 300 MB at 100k: free the disk before the next size
    if args.encode_only:
        return
    results["growth"] = growth(rows_by_n)
    results["extrapolation"] = extrapolate(results["growth"], rows_by_n, dim, args.gpu_tflops)
    results["machine"] = {"cpu_count": os.cpu_count(), "threads": args.threads, "loadavg_start": load_start,
                          "loadavg_end": os.getloadavg(), "wall_s": time.perf_counter() - started}  # fmt: skip
    print_report(results)
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(model).name)
    out = output_file(args.out, args.quick, ROOT / "results" / "mining-scale" / f"mining-scale-{safe}.json")
    write_result(out, model, identity, args, results, data)
    print(f"\nwrote {out} ({time.perf_counter() - started:.0f} s in all)")


if __name__ == "__main__":
    main()
