"""Mining at 1M x 1M on this machine, through the sharded path ``python -m mlse mine`` runs
(:func:`mlse.scale.margin.mine_folders`): approximate search against exact search where exact still runs, and the
cost of the largest size.

    nice -n 10 python -m benchmarks.scale_mine [--model me5-small --backend onnx-int8] [--sizes 100000,1000000]
    python -m benchmarks.scale_mine --quick            # synthetic vectors, no model: seconds

The task (``--real`` sentences a side, default 100,000: as far as the local corpora go at 10 % gold) is
``benchmarks.mining_scale``'s: gold Tatoeba-Challenge X-English pairs hidden among real distractors from the local
corpora (Tatoeba, STS Multi MT English, FLORES / WMT halves), embedded by ``mlse embed``'s pipeline into shards.
Beyond ``--real`` rows a side the distractors are synthetic: noisy copies of the side's real distractor embeddings
(``--noise``: the noise vector's length; never a copy of a gold sentence), see ``benchmarks/_scale_mine_sides.py``.

Each (size, index) is mined in a fresh subprocess (``--mine-worker``), so its peak RSS and CPU time are its own:
index ``exact`` at the sizes up to ``--exact-max``, and ``--approx`` (default ivf-pq) at every size. Reported per run:
the steps' seconds (index build, search, margin, 1:1 selection), wall and CPU time, peak RSS, pairs mined, F1 against
the gold pairs (oracle threshold, and tuned on one half of the sources and applied to the other:
``split_half_prf``), and recall@16 of the forward search against exact search on ``--recall-sample`` source
queries (the exact neighbours computed shard by shard). Writes one JSON (``--out``, default
results/scale/scale-mine.json; --quick: a temporary folder). The embeddings stay in ``--work`` for a rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._scale_mine_sides import embed_side, extend_side, quick_sides, real_task
from benchmarks.common import QUICK_HELP, machine, output_file
from mlse.atomic import atomic_write_text
from mlse.data.portable import portable_record
from mlse.evaluation.index import recall_at_k
from mlse.evaluation.mining import best_threshold, mining_prf, split_half_prf
from mlse.scale.embed import complete_manifest, embedding_shards
from mlse.scale.engine import EngineOptions
from mlse.scale.search import REFINE, IndexSpec
from mlse.scale.shards import ShardFolder, read_shard_file

ROOT = Path(__file__).resolve().parents[1]
RECALL_K = 16


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scale_mine", description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="me5-small")
    p.add_argument("--backend", default="onnx-int8")
    p.add_argument("--real", type=int, default=100_000, help="real sentences a side (10 %% of them gold)")
    p.add_argument("--sizes", default="100000,1000000", help="rows a side, comma-separated (>= --real)")
    p.add_argument("--exact-max", type=int, default=100_000, help="exact search at the sizes up to this")
    p.add_argument("--approx", default="ivf-pq", choices=["ivf", "ivf-pq"], help="the approximate index")
    p.add_argument("--nprobe", type=int, default=64)
    p.add_argument("--refine", type=int, default=REFINE, help="ivf-pq: candidates re-scored, times 16")
    p.add_argument("--noise", type=float, default=0.3, help="length of the noise added to a synthetic copy")
    p.add_argument("--gold-fraction", type=float, default=0.1)
    p.add_argument("--recall-sample", type=int, default=2000)
    p.add_argument("--shard-rows", type=int, default=10_000)
    p.add_argument("--engine", default="local", choices=["local", "ray"])
    p.add_argument("--workers", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=None)
    p.add_argument("--work", default=None, help="embeddings and search results (default /tmp/mlse-scale-mine)")
    p.add_argument("--encode-only", action="store_true", help="embed the real sentences, then stop")
    p.add_argument("--out", default=None, help="result JSON (default results/scale/scale-mine.json)")
    p.add_argument("--quick", action="store_true", help=QUICK_HELP)
    p.add_argument("--mine-worker", nargs=3, metavar=("SRC", "TGT", "WORK"), help=argparse.SUPPRESS)
    p.add_argument("--index", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.quick:
        args.real, args.sizes, args.exact_max, args.recall_sample, args.shard_rows = 600, "600,1500", 600, 100, 200
    args.sizes = sorted({int(s) for s in args.sizes.split(",")})
    if args.sizes[0] < args.real:
        raise SystemExit(f"--sizes: each at least --real ({args.real:,})")
    return args


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def mine_worker(args: argparse.Namespace) -> None:
    """One mining run in this process (local engine) or on Ray; the pairs and what it cost go to WORK."""
    from mlse.scale.margin import mine_folders

    src, tgt, work = (Path(p) for p in args.mine_worker)
    options = EngineOptions(args.engine, workers=args.workers)
    started, cpu = time.perf_counter(), cpu_seconds()
    spec = IndexSpec(args.index, nprobe=args.nprobe, refine=args.refine)
    mined = mine_folders(src, tgt, work, index=spec, options=options)
    wall = time.perf_counter() - started
    np.savez(work / "pairs.npz", src=mined.src, tgt=mined.tgt, score=mined.score)
    ivf = None if args.index == "exact" else mined.index.lists(complete_manifest(tgt)["rows_total"])
    stats = {
        "seconds": {k: round(v, 1) for k, v in mined.seconds.items()} | {"total": round(wall, 1)},
        "cpu_s": round(cpu_seconds() - cpu, 1),
        "peak_rss_mib": mined.peak_rss_mib,
        "workers": mined.workers,
        "nlist": ivf,
        "nprobe": None if ivf is None else min(args.nprobe, ivf),
        "refine": args.refine if args.index == "ivf-pq" else None,
    }
    atomic_write_text(work / "stats.json", json.dumps(stats) + "\n")


def spawn(src: Path, tgt: Path, work: Path, index: str, args: argparse.Namespace) -> dict:
    if not (work / "stats.json").is_file():  # a finished run is kept: a rerun of the benchmark reads it
        argv = [sys.executable, "-m", "benchmarks.scale_mine", "--mine-worker", str(src), str(tgt), str(work)]
        argv += ["--index", index, "--nprobe", str(args.nprobe), "--refine", str(args.refine), "--engine", args.engine]
        argv += ["--workers", str(args.workers)] if args.workers else []
        proc = subprocess.run(argv, cwd=ROOT, stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"mining with {index} failed:\n{proc.stderr[-3000:]}")
    pairs = np.load(work / "pairs.npz")
    return json.loads((work / "stats.json").read_text()) | {"pairs": {k: pairs[k] for k in pairs.files}}


def quality(pairs: dict, gold: set, n_src: int, seed: int) -> dict:
    candidates = list(zip(pairs["src"].tolist(), pairs["tgt"].tolist(), pairs["score"].tolist()))
    oracle = mining_prf(candidates, gold, best_threshold(candidates, gold))
    half = split_half_prf(candidates, gold, n_src, seed=seed)
    return {
        "pairs": len(candidates),
        "oracle_f1": round(oracle["f1"], 2),
        "split_half": {k: round(v, 4) if isinstance(v, float) else v for k, v in half.items()},
    }


def exact_neighbours(queries: np.ndarray, tgt: Path, k: int) -> np.ndarray:
    """Ids [q, k] of the exact top-k of ``queries`` among the target's rows, one shard at a time."""
    best_s = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(queries), 0), dtype=np.int64)
    for path, lo, _ in embedding_shards(tgt):
        sims = queries @ read_shard_file(path)["embedding"].astype(np.float32).T
        s = np.concatenate([best_s, sims], axis=1)
        ids = np.concatenate([best_i, np.broadcast_to(np.arange(lo, lo + sims.shape[1]), sims.shape)], axis=1)
        top = np.argsort(-s, axis=1, kind="stable")[:, :k]
        best_s, best_i = np.take_along_axis(s, top, axis=1), np.take_along_axis(ids, top, axis=1)
    return best_i


def search_recall(src: Path, tgt: Path, work: Path, sample: np.ndarray) -> float:
    """recall@16 of the forward search results kept in ``work/fwd`` for the ``sample`` source rows."""
    folder = ShardFolder(work / "fwd", {}, what=str(work / "fwd"))
    folder.manifest = json.loads(folder.path.read_text())
    rows, queries = [], []
    for path, lo, hi in embedding_shards(src):
        take = sample[(sample >= lo) & (sample < hi)]
        if len(take):
            queries.append(read_shard_file(path)["embedding"][take - lo].astype(np.float32))
            index = next(i for i, (a, b) in enumerate(folder.manifest["planned"]) if a == lo)
            rows.append(folder.read(index)["ids"][take - lo, :RECALL_K])
    return round(recall_at_k(np.concatenate(rows), exact_neighbours(np.concatenate(queries), tgt, RECALL_K)), 4)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.mine_worker:
        mine_worker(args)
        return
    started = time.perf_counter()
    out = output_file(args.out, args.quick, ROOT / "results" / "scale" / "scale-mine.json")
    work = Path(args.work or (tempfile.mkdtemp(prefix="mlse-scale-mine-") if args.quick else "/tmp/mlse-scale-mine"))
    try:
        run_all(args, out, work, started)
    finally:
        if args.quick and not args.work:
            shutil.rmtree(work, ignore_errors=True)


def run_all(args: argparse.Namespace, out: Path, work: Path, started: float) -> None:
    result = {"benchmark": "scale_mine", "quick": args.quick, "machine": machine(), "args": vars(args).copy()}
    if args.quick:
        gold_n = round(args.real * args.gold_fraction)
        src_real, tgt_real = quick_sides(args.real, gold_n, 32, args.seed, work / "real", args.shard_rows)
        gold = {(i, i) for i in range(gold_n)}
        result |= {"model": "synthetic clustered vectors, d=32", "real": {"n_per_side": args.real}}
    else:
        src_texts, tgt_texts, gold, composition, sources = real_task(
            args.real, args.gold_fraction, args.seed, args.data_dir
        )
        options = EngineOptions(args.engine, workers=args.workers)
        src_real, tgt_real = work / "real" / "src", work / "real" / "tgt"
        encode = {}
        for name, texts, folder in (("src", src_texts, src_real), ("tgt", tgt_texts, tgt_real)):
            t0 = time.perf_counter()
            manifest = embed_side(texts, folder, args.model, args.backend, args.shard_rows, options)
            encode[name] = {"rows": manifest["rows_total"], "seconds_this_run": round(time.perf_counter() - t0, 1)}
            encode[name] |= {"model_identity": manifest["model_identity"], "workers": manifest.get("workers")}
        del src_texts, tgt_texts
        result |= {"model": args.model, "backend": args.backend, "real": composition, "encode": encode}
        result["data_files"] = sources
        if args.encode_only:
            print(json.dumps(encode, indent=1))
            return
    result["synthetic"] = {
        "what": "noisy copies of each side's real distractor embeddings (never of a gold sentence): "
        "normalize(e + g), g ~ N(0, (noise/sqrt(d))^2 I)",
        "noise": args.noise,
    }
    runs = []
    sample = np.sort(np.random.default_rng(args.seed).choice(args.real, args.recall_sample, replace=False))
    for n in args.sizes:
        src, tgt = src_real, tgt_real
        if n > args.real:
            src = extend_side(src_real, work / f"n{n}" / "src", n, {i for i, _ in gold}, args.noise, 1, args.shard_rows)
            tgt = extend_side(tgt_real, work / f"n{n}" / "tgt", n, {j for _, j in gold}, args.noise, 2, args.shard_rows)
        for index in (["exact"] if n <= args.exact_max else []) + [args.approx]:
            print(f"N={n:,}: mining with {index}", flush=True)
            setting = {"exact": "", "ivf": f"-nprobe{args.nprobe}"}.get(
                index, f"-nprobe{args.nprobe}-refine{args.refine}"
            )
            run_dir = work / f"n{n}" / f"{index}{setting}"  # a finished run is reused only with the same settings
            run_dir.mkdir(parents=True, exist_ok=True)
            stats = spawn(src, tgt, run_dir, index, args)
            row = {"n": n, "index": index} | {k: v for k, v in stats.items() if k != "pairs"}
            row |= quality(stats["pairs"], gold, n, args.seed)
            row["recall_at_16"] = search_recall(src, tgt, run_dir, sample)
            runs.append(row)
            print(json.dumps({k: v for k, v in row.items() if k != "workers"}), flush=True)
    result["runs"] = runs
    exact = {r["n"]: r for r in runs if r["index"] == "exact"}
    largest = max(exact) if exact else None
    if largest is not None:
        approx = next(r for r in runs if r["n"] == largest and r["index"] == args.approx)
        diff = approx["split_half"]["f1"] - exact[largest]["split_half"]["f1"]
        result["comparison"] = {
            "n": largest,
            "exact_split_half_f1": exact[largest]["split_half"]["f1"],
            "approx_split_half_f1": approx["split_half"]["f1"],
            "difference": round(diff, 2),
            "oracle_difference": round(approx["oracle_f1"] - exact[largest]["oracle_f1"], 2),
            "within_1_point": abs(diff) <= 1.0,
        }
    result["wall_s"] = round(time.perf_counter() - started, 1)
    atomic_write_text(out, json.dumps(portable_record(result), indent=1) + "\n")
    print(json.dumps(result.get("comparison"), indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
