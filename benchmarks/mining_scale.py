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

Writes one JSON (EvalResult schema plus "pools", "encode", "growth", "extrapolation") atomically to --out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mlse.atomic import atomic_write_text  # noqa: E402
from mlse.evaluation.index import (  # noqa: E402
    build_hnsw,
    build_ivf,
    default_nlist,
    knn,
    knn_numpy,
    l2_normalize,
    recall_at_k,
    search_index,
)
from mlse.evaluation.margin import margin_both_ways  # noqa: E402
from mlse.evaluation.mining import (  # noqa: E402
    MiningSplit,
    best_threshold,
    build_mining_task,
    mining_prf,
    select_one_to_one,
    split_half_prf,
)
from mlse.procmem import peak_rss_mb  # noqa: E402
from mlse.results import EvalResult, format_table  # noqa: E402

STUDENT_RUN = ROOT / "runs" / "minilm-multi-mse60"
METHODS = ("exact", "ivf", "hnsw")
HOUR_S = 3600.0
# Share of the leftover Tatoeba pairs that give their source side (the rest give English): English is the scarcer
# side (184k distinct English vs 250k other sentences), so it gets the larger share.
SRC_SHARE = 0.4


# -- the task ---------------------------------------------------------------------------------------------------------


class Pool:
    """Everything the largest task needs, in fixed random orders, so that a task of size N takes prefixes.

    gold: (src item, tgt item) pairs; src_extra / tgt_extra: distractors; items are sentences (real data) or row
    numbers into synthetic matrices. origin: item -> where it came from; gold_lang: language of each gold source.
    """

    def __init__(self, gold, src_extra, tgt_extra, origin, gold_lang, sources=()):
        self.gold, self.src_extra, self.tgt_extra = gold, src_extra, tgt_extra
        self.origin, self.gold_lang, self.sources = origin, gold_lang, list(sources)


def n_gold_for(n: int, gold_fraction: float) -> int:
    return max(1, round(n * gold_fraction))


def take(pool: Pool, n: int, gold_fraction: float, seed: int) -> MiningSplit:
    """The size-N task: the first gold pairs and distractors of the pool, positions shuffled (they carry no signal)."""
    g = n_gold_for(n, gold_fraction)
    if g > len(pool.gold) or n - g > len(pool.src_extra) or n - g > len(pool.tgt_extra):
        raise SystemExit(f"N={n}: the pool has {len(pool.gold)} gold pairs, {len(pool.src_extra)} / "
                         f"{len(pool.tgt_extra)} src / tgt distractors; need {g} and {n - g}")  # fmt: skip
    src = [s for s, _ in pool.gold[:g]] + pool.src_extra[: n - g]
    tgt = [t for _, t in pool.gold[:g]] + pool.tgt_extra[: n - g]
    rng = np.random.default_rng(seed)
    src_perm, tgt_perm = rng.permutation(n), rng.permutation(n)  # new position -> old position
    src_pos, tgt_pos = np.argsort(src_perm), np.argsort(tgt_perm)  # old position -> new position
    gold = {(int(src_pos[i]), int(tgt_pos[i])) for i in range(g)}
    return MiningSplit(src=[src[p] for p in src_perm], tgt=[tgt[p] for p in tgt_perm], gold=gold)


def composition(pool: Pool, task: MiningSplit) -> dict:
    """Gold vs distractor counts per side, distractors by origin, gold by language: what the output must state."""
    gold_src = {task.src[i] for i, _ in task.gold}
    gold_tgt = {task.tgt[j] for _, j in task.gold}
    lang_of = dict(zip((s for s, _ in pool.gold), pool.gold_lang))
    n = len(task.src)
    return {
        "n_per_side": n,
        "gold_pairs": len(task.gold),
        "gold_fraction": len(task.gold) / n,
        "distractor_fraction": 1 - len(task.gold) / n,
        "gold_languages": dict(Counter(lang_of[s] for s in gold_src).most_common()),
        "src_distractors": dict(Counter(pool.origin[s] for s in task.src if s not in gold_src).most_common()),
        "tgt_distractors": dict(Counter(pool.origin[t] for t in task.tgt if t not in gold_tgt).most_common()),
    }


def synthetic_pool(n_max: int, gold_fraction: float, seed: int, d: int = 32) -> tuple[Pool, np.ndarray, np.ndarray]:
    """Clustered unit vectors (topics) as a stand-in for sentence embeddings: gold targets are noisy copies of their
    sources. Returns the pool (items are row numbers) and the src [n_max, d] / tgt [n_max, d] matrices."""
    rng = np.random.default_rng(seed)
    g = n_gold_for(n_max, gold_fraction)
    centres = rng.standard_normal((max(4, n_max // 50), d))

    def clustered(n: int) -> np.ndarray:
        return centres[rng.integers(0, len(centres), n)] + 0.6 * rng.standard_normal((n, d))

    src = clustered(n_max)  # rows [0, g) are gold sources
    tgt = np.concatenate([src[:g] + 0.25 * rng.standard_normal((g, d)), clustered(n_max - g)])
    origin = {("src", i): "synthetic" for i in range(n_max)} | {("tgt", i): "synthetic" for i in range(n_max)}
    pool = Pool(gold=[(("src", i), ("tgt", i)) for i in range(g)],
                src_extra=[("src", i) for i in range(g, n_max)], tgt_extra=[("tgt", i) for i in range(g, n_max)],
                origin=origin, gold_lang=["synthetic"] * g)  # fmt: skip
    return pool, l2_normalize(src), l2_normalize(tgt)


def _tatoeba_links(data_dir: str | None) -> tuple[list, list, dict, list, dict]:
    """(every known X-English link, gold candidates, gold language by sentence, source files, origin by sentence).

    Links: all Tatoeba-Challenge X-eng pairs (every script / dialect label) and the LASER Tatoeba test set (112
    languages) -- every translation that must not cross the pools. Gold candidates: Challenge pairs in each language's
    standard written form (`default_labels`).
    """
    from mlse.data import default_labels, load_parallel, load_tatoeba, parallel_pairs, tatoeba_languages

    links, gold_candidates, sources = [], [], []
    gold_lang: dict[str, str] = {}
    origin: dict[str, str] = {}
    for folder in parallel_pairs(data_dir):
        if "eng" not in folder.split("-"):
            continue  # X-Y pairs without English: their English translations are unknown, so they cannot be checked
        lang = next(c for c in folder.split("-") if c != "eng")
        every = load_parallel(f"{lang}-eng", data_dir)
        links += zip(every.src, every.tgt)
        sources += every.sources
        std = load_parallel(f"{lang}-eng", data_dir, src_labels=default_labels(lang), tgt_labels={"eng"})
        gold_candidates += zip(std.src, std.tgt)
        gold_lang.update((s.strip(), lang) for s in std.src)
        for s, t in zip(every.src, every.tgt):
            origin.setdefault(s.strip(), "tatoeba-challenge")
            origin.setdefault(t.strip(), "tatoeba-challenge")
    for lang in tatoeba_languages(data_dir):
        corpus = load_tatoeba(lang, data_dir)
        links += zip(corpus.src, corpus.tgt)
        sources += corpus.sources
        for s, t in zip(corpus.src, corpus.tgt):
            origin.setdefault(s.strip(), "laser-tatoeba")
            origin.setdefault(t.strip(), "laser-tatoeba")
    return links, gold_candidates, gold_lang, sources, origin


def _monolingual_extras(data_dir: str | None) -> tuple[list[str], list[str], list, dict]:
    """English distractors (STS Multi MT English; first halves of FLORES / WMT English) and other-language ones
    (second halves of FLORES / WMT, one language per line so the source pool holds no cluster of mutual
    translations). Halves keep every FLORES / WMT translation pair out of the pools."""
    from mlse.data import load_flores, load_wmt, read_sts_file, wmt_sets
    from mlse.data.layout import FLORES_DIR, FLORES_SUFFIX
    from mlse.data.paths import resolve_data_dir
    from mlse.data.stsb import sts_file

    eng: list[str] = []
    other: list[str] = []
    sources: list = []
    origin: dict[str, str] = {}

    def add(texts: list[str], to: list[str], label: str) -> None:
        to += texts
        for t in texts:
            origin.setdefault(t.strip(), label)

    for split in ("train", "dev", "test"):
        path = sts_file("en", split, data_dir)
        s1, s2, _ = read_sts_file(path)
        add(list(dict.fromkeys(s1 + s2)), eng, "sts-en")
        sources.append(path)
    flores = load_flores(None, data_dir)
    sources += [resolve_data_dir(data_dir) / FLORES_DIR / f"{code}{FLORES_SUFFIX}" for code in flores]
    multiway = {"flores": (flores.pop("eng_Latn"), list(flores.values()))}
    w13 = [load_wmt(2013, f"{x}-en", data_dir) for x in ("cs", "de", "es", "fr", "ru")]
    multiway["wmt"] = (w13[0].tgt, [c.src for c in w13])
    for corpus in w13:
        sources += corpus.sources
    for label, (english, others) in multiway.items():
        half = len(english) // 2
        add(english[:half], eng, label)
        add([others[r % len(others)][r] for r in range(half, len(english))], other, label)
    for year, pair in wmt_sets(data_dir):
        if year == 2013:
            continue
        corpus = load_wmt(year, pair, data_dir)
        sources += corpus.sources
        half = len(corpus.src) // 2
        first, second = (corpus.tgt, corpus.src) if corpus.tgt_lang == "en" else (corpus.src, corpus.tgt)
        add(first[:half], eng if "en" in (corpus.src_lang, corpus.tgt_lang) else other, "wmt")
        add(second[half:], other, "wmt")
    return eng, other, sources, origin


def real_pool(n_max: int, gold_fraction: float, seed: int, data_dir: str | None) -> Pool:
    """The largest task from the data folder (see the module docstring); smaller tasks take its prefixes."""
    links, gold_candidates, gold_lang, sources, origin = _tatoeba_links(data_dir)
    eng, other, extra_sources, extra_origin = _monolingual_extras(data_dir)
    for text, label in extra_origin.items():
        origin.setdefault(text, label)
    g = n_gold_for(n_max, gold_fraction)
    train, test = build_mining_task(links, n_gold=g, seed=seed, distractors_src=other, distractors_tgt=eng,
                                    gold_candidates=gold_candidates, src_share=SRC_SHARE)  # fmt: skip
    gold = [(sp.src[i], sp.tgt[j]) for sp in (train, test) for i, j in sorted(sp.gold)]
    gold_src, gold_tgt = {s for s, _ in gold}, {t for _, t in gold}
    src_extra = [s for sp in (train, test) for s in sp.src if s not in gold_src]
    tgt_extra = [t for sp in (train, test) for t in sp.tgt if t not in gold_tgt]
    rng = np.random.default_rng(seed + 1)
    gold = [gold[i] for i in rng.permutation(len(gold))]
    src_extra = [src_extra[i] for i in rng.permutation(len(src_extra))]
    tgt_extra = [tgt_extra[i] for i in rng.permutation(len(tgt_extra))]
    return Pool(gold, src_extra, tgt_extra, origin, [gold_lang[s] for s, _ in gold], sources + extra_sources)


# -- encoding ---------------------------------------------------------------------------------------------------------


def encode_task(encoder, task: MiningSplit, chunk: int = 8192) -> tuple[np.ndarray, np.ndarray, dict]:
    """src [N, d] and tgt [N, d] embeddings through the on-disk cache, timed; counts say what the cache served.

    Encoded in chunks because each chunk lands in the cache when done: an interrupted 100k run keeps its work.
    """
    texts = task.src + task.tgt
    before = dict(encoder.stats)
    t0 = time.perf_counter()
    parts = []
    for start in range(0, len(texts), chunk):
        parts.append(encoder.encode(texts[start : start + chunk], batch_size=64, show_progress=False))
        print(f"  encoded {min(start + chunk, len(texts)):,} / {len(texts):,} texts "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    seconds = time.perf_counter() - t0
    emb = np.concatenate(parts).astype(np.float32)  # [2N, d]
    encoded = encoder.stats["encoded"] - before["encoded"]
    served = encoder.stats["served"] - before["served"]
    info = {"encode_s": seconds, "texts": len(texts), "encoded": encoded, "served_from_cache": served,
            "from_cache": encoded == 0,
            "cold_sentences_per_s": encoded / seconds if encoded > 0.5 * len(texts) else None}  # fmt: skip
    n = len(task.src)
    return emb[:n], emb[n:], info


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


def _oracle_recall(src: np.ndarray, tgt: np.ndarray, fwd_ids: np.ndarray, bwd_ids: np.ndarray, depth: int,
                   seed: int, sample: int = 1000) -> float:
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
    out = {"rows": rows, "rss_start_mb": rss_start, "rss_loaded_mb": rss_loaded, "rss_peak_mb": rss_peak,
           "threads": args.threads, "depth": depth,
           "rss_note": "peak of the whole worker: embeddings of both sides, gold pairs, the index(es), search "
                       "buffers; approximate workers also hold the exact ids (2 x N x depth int64) for recall"}
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


# -- growth fits and extrapolation ------------------------------------------------------------------------------------


def fit_power(ns: list[int], ts: list[float]) -> dict | None:
    """Least-squares fit of log t = log c + b log N; None with fewer than two usable points."""
    pts = [(n, t) for n, t in zip(ns, ts) if t > 0]
    if len(pts) < 2 or len({n for n, _ in pts}) < 2:
        return None
    b, log_c = np.polyfit(np.log([n for n, _ in pts]), np.log([t for _, t in pts]), 1)
    return {"b": float(b), "c": float(math.exp(log_c)), "sizes": [n for n, _ in pts], "seconds": [t for _, t in pts]}


def n_at(fit: dict, seconds: float) -> float | None:
    """The N at which c * N^b reaches `seconds` (extrapolation of the fit); None when b < 0.5, i.e. the measured
    times are dominated by fixed costs and say nothing about growth."""
    return (seconds / fit["c"]) ** (1 / fit["b"]) if fit["b"] >= 0.5 else None


def _n_text(n: float | None) -> str:
    if n is None:
        return "n/a (flat fit: fixed costs dominate the measured sizes)"
    return f"{n:,.0f}" if n < 1e9 else f"{n:.1e}"


def setting_key(row: dict) -> str:
    params = ",".join(f"{k}={v}" for k, v in row["params"].items() if k in ("nprobe", "ef_search"))
    return f"{row['method']} {params}".strip()


def growth(rows_by_n: dict[int, list[dict]]) -> dict:
    """One fit per (method, setting) for total and search time (settings whose nlist scales with N included)."""
    series: dict[str, dict[str, list]] = {}
    for n, rows in sorted(rows_by_n.items()):
        for row in rows:
            s = series.setdefault(setting_key(row), {"n": [], "total": [], "search": []})
            s["n"].append(n)
            s["total"].append(row["total_s"])
            s["search"].append(row["search_s"])
    out = {}
    for key, s in series.items():
        total, search = fit_power(s["n"], s["total"]), fit_power(s["n"], s["search"])
        if total is not None:
            out[key] = {"total": total, "search": search}
    return out


def extrapolate(fits: dict, rows_by_n: dict[int, list[dict]], dim: int, gpu_tflops: float) -> dict:
    """Where exact CPU search passes an hour, and what one GPU would need for the same exact search.

    All numbers are extrapolations: from the measured fit, from the O(N^2 d) law anchored at the largest measured N,
    and (GPU) from an assumed throughput, not a measurement.
    """
    if "exact" not in fits:
        return {}
    n_max = max(rows_by_n)
    exact = next(r for r in rows_by_n[n_max] if r["method"] == "exact")
    # Exact search does N*N*d multiply-adds per direction: 4 N^2 d flops for the two directions.
    cpu_gflops = 4 * n_max**2 * dim / exact["search_s"] / 1e9
    n_1h_quadratic = n_max * math.sqrt(HOUR_S / exact["total_s"])
    gpu_flops = gpu_tflops * 1e12
    out = {
        "basis": "EXTRAPOLATION from the measured sizes, not a measurement",
        "exact_cpu_effective_gflops": cpu_gflops,
        "exact_cpu_n_at_1h_fit": n_at(fits["exact"]["total"], HOUR_S),
        "exact_cpu_n_at_1h_quadratic": n_1h_quadratic,
        "gpu_assumed_tflops": gpu_tflops,
        "gpu_assumption": ("faiss GpuIndexFlatIP, float32, one A100/H100-class GPU at the assumed effective "
                           "throughput; no GPU was available to measure it"),  # fmt: skip
        "gpu_exact_s_at_cpu_1h_n": 4 * n_1h_quadratic**2 * dim / gpu_flops,
        "gpu_exact_n_at_1h": math.sqrt(HOUR_S * gpu_flops / (4 * dim)),
        # float32 vectors of both sides must fit in GPU memory (80 GB) next to the search buffers: keep half of it.
        "single_gpu_max_n_float32_80gb": 40e9 / (2 * dim * 4),
    }
    for key, fit in fits.items():
        if key != "exact":
            out[f"{key} n_at_1h_fit"] = n_at(fit["total"], HOUR_S)
    return out


# -- output ----------------------------------------------------------------------------------------------------------


def table_rows(n: int, rows: list[dict], worker: dict) -> list[dict]:
    out = []
    for r in rows:
        out.append({"N": n, "index": setting_key(r), "build_s": r["build_s"], "search_s": r["search_s"],
                    "total_s": r["total_s"], "knn_recall": r["knn_recall"], "F1_best": r["f1_best"],
                    "F1_heldout": r["f1_heldout"], "peak_rss_mb": worker["rss_peak_mb"],
                    "rss_loaded_mb": worker["rss_loaded_mb"]})  # fmt: skip
    return out


def print_report(results: dict) -> None:
    for n, enc in results["encode"].items():
        comp = results["pools"][n]
        if enc.get("synthetic"):
            cache = "synthetic vectors, no encoder"
        elif enc.get("from_cache"):
            cache = "all from the embedding cache"
        else:
            cache = f"encoded {enc['encoded']:,}, served {enc['served_from_cache']:,} from the embedding cache"
        print(f"\nN={int(n):,} per side: gold {comp['gold_pairs']:,} ({100 * comp['gold_fraction']:.0f} %), "
              f"distractors {comp['n_per_side'] - comp['gold_pairs']:,} per side; "
              f"encode {enc['encode_s']:.1f} s ({cache})")  # fmt: skip
        for side in ("src", "tgt"):
            counts = [("gold", comp["gold_pairs"]), *comp[f"{side}_distractors"].items()]
            parts = ", ".join(f"{k} {100 * v / comp['n_per_side']:.1f} %" for k, v in counts)
            print(f"  {side} pool: {parts}")
    rows = [r for n in sorted(results["table"], key=int) for r in results["table"][n]]
    print("\n" + format_table(rows, list(rows[0]), digits=2))
    print("\nGrowth, time = c * N^b (log-log fit over the measured sizes):")
    for key, fit in results["growth"].items():
        search = f", search b = {fit['search']['b']:.2f}" if fit.get("search") else ""
        print(f"  {key:<24} total b = {fit['total']['b']:.2f}{search}")
    ext = results["extrapolation"]
    if ext:
        print(f"\n{ext['basis']}:")
        print(f"  exact CPU search runs at {ext['exact_cpu_effective_gflops']:.0f} GFLOP/s effective; mining passes "
              f"1 h at N ~ {_n_text(ext['exact_cpu_n_at_1h_fit'])} (fit) / "
              f"{_n_text(ext['exact_cpu_n_at_1h_quadratic'])} (N^2 law from the largest N)")  # fmt: skip
        print(f"  one GPU at an assumed {ext['gpu_assumed_tflops']:g} TFLOP/s: that N in "
              f"{ext['gpu_exact_s_at_cpu_1h_n']:.0f} s; 1 h at N ~ {_n_text(ext['gpu_exact_n_at_1h'])}; float32 "
              f"vectors fit one 80 GB GPU up to N ~ {_n_text(ext['single_gpu_max_n_float32_80gb'])} "
              "per side")  # fmt: skip
        for key, value in ext.items():
            if key.endswith("n_at_1h_fit") and not key.startswith("exact"):
                fit = "" if value is None else " (fit)"
                print(f"  {key.removesuffix(' n_at_1h_fit')}: mining passes 1 h at N ~ {_n_text(value)}{fit}")


def _finite(obj):
    """NaN / inf -> None, so the file is strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def write_result(path: Path, model: str, identity: str, args, results: dict, data: dict) -> None:
    scores = {f"N={n} {row['index']}": {k: v for k, v in row.items() if k not in ("N", "index")}
              for n, rows in results["table"].items() for row in rows}  # fmt: skip
    averages = {f"growth:{key}": {"b_total": fit["total"]["b"], "b_search": (fit["search"] or {}).get("b")}
                for key, fit in results["growth"].items()}  # fmt: skip
    config = {k: v for k, v in vars(args).items() if k not in ("worker", "workdir", "out")}
    config.update({"margin": "ratio", "retrieval": "max-score 1:1 (LASER)", "src_share": SRC_SHARE})
    result = EvalResult(model=model, task="mining-scale", split="pool", scores=scores, config=config, data=data,
                        averages=averages, model_identity=identity)  # fmt: skip
    obj = result.to_dict() | {k: results[k] for k in ("pools", "encode", "workers", "growth", "extrapolation",
                                                       "machine")}  # fmt: skip
    atomic_write_text(path, json.dumps(_finite(obj), indent=1, ensure_ascii=False) + "\n")


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
    p.add_argument("--encode-threads", type=int, default=None,
                   help="torch threads for encoding (default torch's; 1 is faster on a CPU shared with other jobs)")
    p.add_argument("--gpu-tflops", type=float, default=20.0, help="ASSUMED effective GPU throughput (extrapolation)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="result JSON (default results/mining-scale/mining-scale-<model>.json)")
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
        data = {str(p): file_sha256(p) for p in sorted(set(map(Path, pool.sources)))}
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
                    "rows": worker["rows"]}
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
    out = Path(args.out or ROOT / "results" / "mining-scale" / f"mining-scale-{safe}.json")
    write_result(out, model, identity, args, results, data)
    print(f"\nwrote {out} ({time.perf_counter() - started:.0f} s in all)")


if __name__ == "__main__":
    main()
