"""Margin-based bitext mining at scale: exact vs approximate (IVF, HNSW) nearest-neighbour search, N up to 100k.

    python -m benchmarks.mining_scale --sizes 10000,30000,100000 [--model runs/minilm-multi-mse60]
    python -m benchmarks.mining_scale --quick            # synthetic embeddings, seconds (the smoke test runs this)

The task, per N: two pools of N sentences each, a source pool (non-English) and a target pool (English). A fraction
(--gold-fraction, 10 % by default) are gold translation pairs from Tatoeba-Challenge X-English (12 languages,
standard scripts); the rest are distractors with no translation on the other side: Tatoeba sentences (Challenge and
the LASER test set's 112 languages) whose translations were kept out of the opposite pool, STS Multi MT English
sentences, and FLORES-200 / WMT halves (one half gives English, the other half another language).
`mlse.evaluation.mining.build_mining_task` does the checks (no exact duplicates, no known translation across the pools
except gold). The pools for the smaller N are prefixes of the largest one, so its embeddings are reused from the cache.

Mining is LASER's (`mlse.evaluation.mining.mine_candidates`, its steps timed one by one): ratio margin over k nearest
neighbours both ways (`margin_both_ways`), best candidate forward and backward, union, greedy 1:1
(`select_one_to_one`). It runs once per index: exact (faiss.IndexFlatIP), IVF (IndexIVFFlat, nlist ~ 4*sqrt(N), nprobe
sweep) and HNSW (IndexHNSWFlat, efSearch sweep), each in a fresh subprocess so that its peak RSS (VmHWM, read by
`mlse.serving.procmem`) is its own. Reported per setting: index build, search (both directions), margin and 1:1
selection
times, recall of the candidate lists against exact kNN (the exact search's own against a numpy oracle on a sample),
F1 at the best threshold (oracle) and at a threshold tuned on a held-out half of the source sentences
(`split_half_prf`). Times are fitted as t = c * N^b (log-log least squares) and extrapolated -- the extrapolations are
labelled as such in the output.

Writes one JSON (EvalResult schema plus "pools", "encode", "workers", "growth", "extrapolation", "machine") atomically
to --out (--quick without --out: a temporary folder, never results/). This module is the command line and the run
over the sizes; each step has its own module: the task in :mod:`mlse.evaluation.mining_pool` (the synthetic one in
``_mining_pool.py``), its encoding in ``_mining_encode.py``, one index kind's worker in ``_mining_worker.py``, the
growth fits and extrapolation in ``_mining_growth.py``, the report and the JSON in ``_mining_report.py``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._mining_encode import encode_task
from benchmarks._mining_growth import extrapolate, growth
from benchmarks._mining_pool import synthetic_pool
from benchmarks._mining_report import print_report, table_rows, write_result
from benchmarks._mining_worker import ints, run_worker, spawn_worker
from benchmarks.common import output_file
from mlse.evaluation.mining_pool import data_pool, pool_composition, pool_task

ROOT = Path(__file__).resolve().parents[1]
STUDENT_RUN = ROOT / "runs" / "minilm-multi-mse60"
METHODS = ("exact", "ivf", "hnsw")


def parse_args(argv=None):
    default_model = str(STUDENT_RUN) if (STUDENT_RUN / "model").is_dir() else "minilm-en"
    p = argparse.ArgumentParser(prog="python -m benchmarks.mining_scale", description=__doc__.split("\n")[0])
    p.add_argument(
        "--sizes",
        default=None,
        help="sentences per side, comma-separated (default 10000,30000,100000; --quick: 300,600)",
    )
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
    p.add_argument(
        "--out",
        default=None,
        help="result JSON (default results/mining-scale/mining-scale-<model>.json; --quick: in a temporary folder)",
    )
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
    sizes = sorted(set(ints(args.sizes)))
    methods = [m for m in METHODS if m in args.methods.split(",")]  # exact first: the others' recall needs it
    if "exact" not in methods or set(args.methods.split(",")) - set(METHODS):
        raise SystemExit(f"--methods: a comma-separated subset of {', '.join(METHODS)} that includes exact")
    started = time.perf_counter()
    load_start = os.getloadavg()
    if args.quick:
        pool, syn_src, syn_tgt = synthetic_pool(sizes[-1], args.gold_fraction, args.seed)
        model, identity, encoder, data = "synthetic", "synthetic clustered vectors, d=32", None, {}
    else:
        from mlse.data.portable import data_hashes
        from mlse.models import load_model

        t0 = time.perf_counter()
        pool = data_pool(sizes[-1], args.gold_fraction, args.seed, args.data_dir)
        print(
            f"pool for N <= {sizes[-1]:,} built in {time.perf_counter() - t0:.0f} s: {len(pool.gold):,} gold, "
            f"{len(pool.src_extra):,} / {len(pool.tgt_extra):,} src / tgt distractors",
            flush=True,
        )
        encoder = load_model(args.model)
        if args.encode_threads:
            import torch

            torch.set_num_threads(args.encode_threads)
        model, identity = args.model.removeprefix(str(ROOT) + "/"), encoder.identity
        data = data_hashes(sorted(set(map(Path, pool.sources))), args.data_dir)
    results = {"pools": {}, "encode": {}, "workers": {}, "table": {}}
    rows_by_n: dict[int, list[dict]] = {}
    dim = 0
    with tempfile.TemporaryDirectory(prefix="mining-scale-") as tmp:
        for n in sizes:
            task = pool_task(pool, n, args.gold_fraction, args.seed)
            results["pools"][n] = pool_composition(pool, task)
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
    results["machine"] = {
        "cpu_count": os.cpu_count(),
        "threads": args.threads,
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
        "wall_s": time.perf_counter() - started,
    }
    print_report(results)
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(model).name)
    out = output_file(args.out, args.quick, ROOT / "results" / "mining-scale" / f"mining-scale-{safe}.json")
    write_result(out, model, identity, args, results, data)
    print(f"\nwrote {out} ({time.perf_counter() - started:.0f} s in all)")


if __name__ == "__main__":
    main()
