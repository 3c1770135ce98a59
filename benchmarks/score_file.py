"""Scoring a user's pairs file: ``python -m mlse score`` cold and warm, its peak memory, and the app's Score-a-file.

    python -m benchmarks.score_file [--backend onnx-int8] [--models me5-small,muse,minilm-en] [--pairs 20000]
                                    [--memory-pairs 100000] [--app-rows 1000] [--out results/score-file] [--quick]

The pairs file is built in a temporary folder (never committed) from STS Multi MT **train**: cross-lingual pairs
``(A.sentence1[r], B.sentence2[r], score[r])`` of the 12 pairs of :data:`mlse.data.pairs.CROSS_12`, taken row-major
with pair *k* offset by *k* x rows/12 rows (so the English side repeats as little as it can), 12 x 5,749 = 68,988
distinct pairs; a longer file repeats them with `` [2]``, `` [3]`` ... appended to both sentences (new texts, so
nothing comes from the cache). The JSON says how many texts are distinct.

1. **Prepare** (not timed): every model is used once on the backend in a child process, so conversions and ONNX
   exports exist; they live beside the embedding cache under ``MLSE_CACHE`` (:mod:`mlse.dirs`). The benchmark's cache
   root links every entry of ``--model-cache`` (default: this user's cache root) except ``embeddings/``, so "cold"
   means an empty embedding cache with the models' files warm (model folders missing there are created first, so what
   the preparation exports is kept for the next run).
2. **(a) cold**: the CLI as a child process on ``--pairs`` pairs, empty embedding cache: pairs per second of wall time
   (process start, imports and model loading included, as a user waits).
3. **(b) warm**: the same command again: wall time and speed-up; the two outputs must be byte-identical.
4. **(c) memory**: the CLI on ``--memory-pairs`` pairs, empty embedding cache again: the child's peak RSS
   (``ru_maxrss`` from ``wait4``, and ``VmHWM`` polled every 0.5 s).
5. **(d) app**: :func:`mlse.ui.score_file.score_file` in this process on an ``--app-rows``-row upload with
   ``AppState(backend=...)``, models loaded first (reported apart): seconds with an empty embedding cache, then again.

Targets: (a) >= 150 pairs/s, (b) >= 20x, (c) <= 1.5 GiB, (d) <= 15 s cold and <= 2 s cached, with the three
default models on ``--backend onnx-int8``. ``--quick`` (a few dozen pairs, minilm-en, torch, unless given) only proves
the script works. Times depend on the machine and its load: the JSON records the CPU, its ISA flags and the load
average.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import cpu_name, isa_flags
from mlse.atomic import atomic_write_text
from mlse.data.pairs import CROSS_12
from mlse.data.portable import portable_record
from mlse.data.stsb import load_sts
from mlse.dirs import cache_root
from mlse.encoders.catalogue import DEFAULT_MODELS
from mlse.encoders.identity import BACKENDS
from mlse.runs.results import library_versions
from mlse.serving.procmem import memory_mb

ROOT = Path(__file__).resolve().parents[1]
TARGETS = {
    "cold_pairs_per_s": 150.0,
    "warm_speedup": 20.0,
    "peak_rss_mb": 1536.0,
    "app_cold_s": 15.0,
    "app_cached_s": 2.0,
}
# What a model's first use leaves under the cache root (mlse.dirs): conversions, ONNX exports, tokenizers, muse's table
MODEL_FOLDERS = ("converted", "onnx", "tokenizers", "muse", "shipped")
QUICK = {"pairs": 40, "memory_pairs": 120, "app_rows": 30, "models": "minilm-en", "backend": "torch"}
ENCODED = re.compile(r"encoded ([\d,]+) texts, served ([\d,]+) from the embedding cache")
RATE = re.compile(r"\(([\d,]+) rows/s\)")


# -- the pairs file ---------------------------------------------------------------------------------------------------
def cross_pairs(n: int, data_dir: str | None) -> tuple[list[tuple[str, str, float]], dict]:
    """``n`` (sentence1, sentence2, score) rows of STS Multi MT train across CROSS_12, and how they were made."""
    sets = [load_sts(pair, "train", data_dir) for pair in CROSS_12]
    rows = len(sets[0])
    stride = rows // len(sets)

    def every():
        for copy in itertools.count(1):
            suffix = "" if copy == 1 else f" [{copy}]"
            for i in range(rows):
                for k, ds in enumerate(sets):
                    r = (i + k * stride) % rows
                    if ds.s1[r].strip() and ds.s2[r].strip():
                        yield ds.s1[r] + suffix, ds.s2[r] + suffix, float(ds.scores[r])

    pairs = list(itertools.islice(every(), n))
    available = sum(1 for ds in sets for a, b in zip(ds.s1, ds.s2) if a.strip() and b.strip())
    info = {
        "source": f"STS Multi MT train, (A.sentence1[r], B.sentence2[r]) of {', '.join(CROSS_12)}",
        "order": f"row-major, pair k offset by k x {stride} rows",
        "distinct_pairs_available": available,
        "suffix": "' [2]', ' [3]' ... appended to both sentences of a repeated pair",
    }
    return pairs, info


def file_facts(pairs: list[tuple[str, str, float]], available: int) -> dict:
    """Pairs, distinct texts and rows made by repetition (with a suffix) of one file."""
    return {
        "pairs": len(pairs),
        "distinct_texts": len({t for p in pairs for t in p[:2]}),
        "suffixed_rows": max(0, len(pairs) - available),
    }


def write_pairs(path: Path, pairs: list[tuple[str, str, float]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(["sentence1", "sentence2", "score"])
        writer.writerows(pairs)
    return path


# -- caches -----------------------------------------------------------------------------------------------------------
def linked_cache(root: Path, source: Path, *, create: bool = False) -> Path:
    """A cache root holding links to every entry of ``source`` but its embedding cache: models warm, embeddings cold.

    ``create``: first make the model folders ``source`` lacks, so what the preparation converts or exports stays there
    for the next run (as the CLI would leave it)."""
    root.mkdir(parents=True)
    if create:
        for name in MODEL_FOLDERS:
            (source / name).mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        for entry in source.iterdir():
            if entry.name != "embeddings":
                (root / entry.name).symlink_to(entry.resolve())
    return root


def empty_embeddings(root: Path) -> None:
    shutil.rmtree(root / "embeddings", ignore_errors=True)


def prepare(models: list[str], backend: str, env: dict) -> float:
    """Use every model once (conversions, exports), in its own process; then empty the embedding cache."""
    code = (
        "import sys\nfrom mlse.models import load_model\n"
        "for name in sys.argv[2:]:\n    load_model(name, backend=sys.argv[1]).encode(['warm up'])"
    )
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code, backend, *models], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL
    )
    empty_embeddings(Path(env["MLSE_CACHE"]))
    return round(time.perf_counter() - started, 1)


# -- one CLI run ------------------------------------------------------------------------------------------------------
def run_cli(pairs_file: Path, n: int, out: Path, args, env: dict, log: Path) -> dict:
    """``python -m mlse score`` as a child: wall time, its own peak RSS, what it encoded and served."""
    cmd = [
        sys.executable,
        "-m",
        "mlse",
        "score",
        str(pairs_file),
        "--models",
        args.models,
        "--backend",
        args.backend,
        "--out",
        str(out),
    ]
    polled, done = [0.0], threading.Event()
    with open(log, "w", encoding="utf-8") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)

        def poll():
            while not done.wait(0.5):
                try:
                    polled[0] = max(polled[0], memory_mb(proc.pid)["peak_rss_mb"])
                except (OSError, KeyError):
                    return

        watcher = threading.Thread(target=poll, daemon=True)
        watcher.start()
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        done.set()
    proc.returncode = os.waitstatus_to_exitcode(status)
    text = log.read_text(encoding="utf-8")
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n" + "\n".join(text.splitlines()[-15:]))
    counts = [(int(a.replace(",", "")), int(b.replace(",", ""))) for a, b in ENCODED.findall(text)]
    rate = RATE.findall(text)
    print(
        f"  {n:,} pairs in {seconds:.1f} s ({n / seconds:,.1f} pairs/s), peak RSS {usage.ru_maxrss / 1024:,.0f} MiB",
        flush=True,
    )
    return {
        "pairs": n,
        "seconds": round(seconds, 2),
        "pairs_per_s": round(n / seconds, 1),
        "cli_scoring_rows_per_s": int(rate[-1].replace(",", "")) if rate else None,
        "encoded": sum(c[0] for c in counts),
        "served": sum(c[1] for c in counts),
        "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
        "vmhwm_polled_mb": round(polled[0], 1),
    }


# -- the app ----------------------------------------------------------------------------------------------------------
def measure_app(args, models: list[str], upload: Path, cache: Path) -> dict:
    """The Score tab's file handler on ``upload``: models loaded first (as in a running app), then the seconds with an
    empty embedding cache and with the upload's texts cached."""
    os.environ["MLSE_CACHE"] = str(cache)  # read whenever an embedding store opens: this process's cache from now
    try:
        from mlse.ui.score_file import score_file
    except ImportError as exc:
        return {"skipped": f"mlse.ui.score_file is not available ({exc})"}
    from mlse.data.hub_probe import remember
    from mlse.serving.app_state import AppState

    remember(False)  # never wait on the hub
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bars in the log
    state = AppState(backend=args.backend)
    started = time.perf_counter()
    for name in models:  # loaded as a running app holds them (weights load on the first encode)
        state.encoder(name).encode(["warm up"])
    result = {"rows": args.app_rows, "models_load_s": round(time.perf_counter() - started, 2)}
    for key in ("cold_s", "cached_s"):
        started = time.perf_counter()
        output = score_file(state, str(upload), None, list(models))
        result[key] = round(time.perf_counter() - started, 2)
        if output.csv_path is None or len(output.summary) != len(models):
            raise SystemExit(f"the app scored {len(output.summary)} of {len(models)} models: {output.message}")
        with open(output.csv_path, encoding="utf-8", newline="") as fh:
            scored = sum(1 for _ in csv.reader(fh)) - 1
        if scored != args.app_rows:
            raise SystemExit(f"the app's CSV holds {scored} rows, expected {args.app_rows}: {output.message}")
        print(f"  app, {args.app_rows:,} rows, {key.removesuffix('_s')}: {result[key]:.2f} s", flush=True)
    return result


# -- report -----------------------------------------------------------------------------------------------------------
def verdicts(result: dict) -> dict:
    t = TARGETS
    values = {
        "cold_pairs_per_s": (result["cold"]["pairs_per_s"], ">="),
        "warm_speedup": (result["warm"]["speedup"], ">="),
        "peak_rss_mb": (result["memory"]["peak_rss_mb"], "<="),
        "app_cold_s": (result["app"].get("cold_s"), "<="),
        "app_cached_s": (result["app"].get("cached_s"), "<="),
    }
    out = {}
    for key, (value, op) in values.items():
        met = None if value is None else (value >= t[key] if op == ">=" else value <= t[key])
        out[key] = {"value": value, "target": f"{op} {t[key]:g}", "met": met}
    return out


def markdown(result: dict) -> str:
    v, c, w, m, a = result["targets"], result["cold"], result["warm"], result["memory"], result["app"]
    f = result["pairs_file"]

    def mark(key: str) -> str:
        met = v[key]["met"]
        return "not measured" if met is None else ("PASS" if met else "FALL SHORT")

    app_cold = (
        f"{a['cold_s']:.2f} s (models loaded before: {a['models_load_s']:.1f} s)"
        if "cold_s" in a
        else a.get("skipped", "-")
    )
    app_cached = f"{a['cached_s']:.2f} s" if "cached_s" in a else "-"
    lines = [
        "# Scoring a pairs file: `mlse score` and the app's Score a file",
        "",
        f"`{result['command']}`"
        + (" (quick mode: proves the script runs; not comparable with the targets)" if result["quick"] else ""),
        "",
        f"{result['created']}; CPU {result['cpu']} ({', '.join(result['isa']) or 'no AVX2'}), {result['cpus']} CPUs, "
        f"load average {result['load_average_at_start']:.1f} at start; backend {result['backend']}, models "
        f"{result['models']}, MLSE_THREADS {result['mlse_threads'] or 'unset (2)'}.",
        "",
        f"Pairs files: {f['source']}; {f['order']}; rows past the {f['distinct_pairs_available']:,} distinct pairs "
        f"repeat with {f['suffix']}. Distinct texts: {f['timed']['distinct_texts']:,} in the {c['pairs']:,}-pair "
        f"file, {f['memory']['distinct_texts']:,} in the {m['pairs']:,}-pair file ({f['memory']['suffixed_rows']:,} "
        f"suffixed rows). Model preparation (not timed): {result['prepare_s']} s.",
        "",
        "| measure | result | target | verdict |",
        "|---|---|---|---|",
        f"| (a) CLI, empty embedding cache, {c['pairs']:,} pairs | {c['pairs_per_s']:,.1f} pairs/s "
        f"({c['seconds']:.1f} s wall; {c['encoded']:,} texts encoded) | >= {TARGETS['cold_pairs_per_s']:g} pairs/s "
        f"| {mark('cold_pairs_per_s')} |",
        f"| (b) the same command again | {w['seconds']:.1f} s wall: {w['speedup']:.1f}x faster "
        f"({w['encoded']:,} encoded, output identical: {w['same_output']}) | >= {TARGETS['warm_speedup']:g}x "
        f"| {mark('warm_speedup')} |",
        f"| (c) CLI on {m['pairs']:,} pairs, peak RSS | {m['peak_rss_mb']:,.0f} MiB ({m['seconds']:.0f} s wall) | "
        f"<= {TARGETS['peak_rss_mb']:,.0f} MiB (1.5 GiB) | {mark('peak_rss_mb')} |",
        f"| (d) app, {a.get('rows', '-')}-row upload, empty embedding cache | {app_cold} | <= "
        f"{TARGETS['app_cold_s']:g} s | {mark('app_cold_s')} |",
        f"| (d) app, the same upload again | {app_cached} | <= {TARGETS['app_cached_s']:g} s "
        f"| {mark('app_cached_s')} |",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.score_file", description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=BACKENDS, default="onnx-int8")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated, as mlse score takes")
    parser.add_argument("--pairs", type=int, default=20_000, help="(a) and (b): pairs in the file")
    parser.add_argument("--memory-pairs", type=int, default=100_000, help="(c): pairs in the file")
    parser.add_argument("--app-rows", type=int, default=1_000, help="(d): rows of the upload")
    parser.add_argument(
        "--model-cache",
        type=Path,
        default=None,
        help="cache root whose converted and exported models are reused (default: MLSE_CACHE or "
        "the user's cache dir); its embeddings are never used",
    )
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="folder for score-file.json and score-file.md "
        "(default results/score-file; with --quick a temporary folder)",
    )
    parser.add_argument("--quick", action="store_true", help="a few dozen pairs, minilm-en, torch: proves it works")
    args = parser.parse_args(argv)
    if args.quick:  # the quick settings, except those given on the command line
        for key, value in QUICK.items():
            if getattr(args, key) == parser.get_default(key):
                setattr(args, key, value)
    if min(args.pairs, args.memory_pairs, args.app_rows) < 2:
        raise SystemExit("--pairs, --memory-pairs and --app-rows must be at least 2")
    out = args.out or (Path(tempfile.mkdtemp(prefix="score-file-quick-")) if args.quick else Path("results/score-file"))
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    source_cache = (args.model_cache or cache_root()).expanduser()
    command = "python -m benchmarks.score_file " + " ".join(sys.argv[1:] if argv is None else argv)
    result = {
        "benchmark": "score-file",
        "command": command.strip(),
        "quick": args.quick,
        "backend": args.backend,
        "models": ",".join(models),
        "cpu": cpu_name(),
        "isa": isa_flags(),
        "cpus": os.cpu_count(),
        "mlse_threads": os.environ.get("MLSE_THREADS"),
        "load_average_at_start": os.getloadavg()[0],
        "versions": library_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "model_cache": str(source_cache),
    }
    with tempfile.TemporaryDirectory(prefix="mlse-score-file-") as tmp_name:
        tmp = Path(tmp_name)
        os.environ.setdefault("MLSE_RUNS", str(tmp / "runs"))  # the app's model scan: no trained runs, nothing moved
        cache = linked_cache(tmp / "cache", source_cache, create=not args.quick)
        env = {**os.environ, "MLSE_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        big, result["pairs_file"] = cross_pairs(max(args.pairs, args.memory_pairs, args.app_rows), args.data_dir)
        available = result["pairs_file"]["distinct_pairs_available"]
        small = write_pairs(tmp / "pairs.csv", big[: args.pairs])
        large = write_pairs(tmp / "pairs-large.csv", big[: args.memory_pairs])
        upload = write_pairs(tmp / "upload.csv", big[: args.app_rows])
        for key, n in (("timed", args.pairs), ("memory", args.memory_pairs), ("app", args.app_rows)):
            result["pairs_file"][key] = file_facts(big[:n], available)
        del big
        print(f"prepare {','.join(models)} on {args.backend} (not timed)", flush=True)
        result["prepare_s"] = None if args.quick else prepare(models, args.backend, env)
        print("(a) cold embedding cache", flush=True)
        result["cold"] = run_cli(small, args.pairs, tmp / "cold.csv", args, env, tmp / "cold.log")
        print("(b) the same command again", flush=True)
        result["warm"] = run_cli(small, args.pairs, tmp / "warm.csv", args, env, tmp / "warm.log")
        result["warm"]["speedup"] = round(result["cold"]["seconds"] / result["warm"]["seconds"], 1)
        result["warm"]["same_output"] = (tmp / "cold.csv").read_bytes() == (tmp / "warm.csv").read_bytes()
        print(f"(c) {args.memory_pairs:,} pairs, empty embedding cache: peak memory", flush=True)
        empty_embeddings(cache)
        result["memory"] = run_cli(large, args.memory_pairs, tmp / "large.csv", args, env, tmp / "large.log")
        print(f"(d) the app's Score a file, {args.app_rows:,} rows", flush=True)
        result["app"] = measure_app(args, models, upload, linked_cache(tmp / "app-cache", cache))
    result["targets"] = verdicts(result)
    result["load_average_at_end"] = os.getloadavg()[0]
    record = portable_record(result, args.data_dir)  # the file names no absolute path (e.g. the model cache)
    atomic_write_text(out / "score-file.json", json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    report = markdown(result)
    atomic_write_text(out / "score-file.md", report)
    print("\n" + report)
    print(f"wrote {out / 'score-file.json'} and {out / 'score-file.md'}")


if __name__ == "__main__":
    main()
