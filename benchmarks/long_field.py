"""One huge field: ``python -m mlse score`` on a pairs file whose first sentence is 50 MB; wall time and peak memory.

    python -m benchmarks.long_field [--mb 50] [--kinds words,nospace,cjk] [--models me5-small,muse,minilm-en]
                                    [--backends torch,onnx-int8] [--repeat 3] [--model-cache DIR]
                                    [--out results/long-field]
    python -m benchmarks.long_field --quick     # a 2 MB field, minilm-en: proves the script runs

Every encoder cuts a text to what its model reads before tokenising (:mod:`mlse.encoders.text_cut`); before that, one
50 MB field cost ``mlse score`` ~180 s and 7.2 GB (the whole text was tokenised, then truncated).

The pairs files (a TSV: header, the long field paired with a short sentence, then two ordinary pairs) are built in a
temporary folder from FLORES-200 devtest, repeated to ``--mb`` MB of UTF-8:

- ``words``: the English sentences joined by spaces (ordinary text: the cut ends after the model's last word);
- ``nospace``: the same with every space removed (one 50 MB word: the character bound);
- ``cjk``: the Simplified Chinese sentences joined without spaces (3 bytes a character).

Each run is the CLI as a child process with an empty embedding cache, the default models (``mlse score``'s own default
unless ``--models``) on each of ``--backends`` (default: torch, ``mlse score``'s own); the models' files (the converted
me5-small, exports, weight fingerprints) are prepared first, not timed, and reused through a cache root that links
every entry of ``--model-cache`` but ``embeddings/``. Measured, at nice -10 where permitted: wall time from process
start to exit (imports and model loading included, as a user waits) and the child's peak RSS (``ru_maxrss``); with
``--repeat``, the fastest run and the largest RSS. The same command on the file without its long row (``baseline``)
shows what start-up costs on this machine at this load; the output's long cell must come back byte for byte.

Targets: each long file under 10 s and under 1 GiB peak RSS. Times depend on the machine and its load: the JSON
records the CPU, its ISA flags and the load average. ``--quick`` (a 2 MB ``words`` field, minilm-en, one run: nothing
prepared, no baseline) only proves the script works.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, cpu_name, isa_flags, output_dir, renice
from mlse.atomic import atomic_write_text
from mlse.data.paths import require_subdir, resolve_data_dir
from mlse.data.records import CSV_FIELD_LIMIT
from mlse.dirs import cache_root
from mlse.encoders.catalogue import DEFAULT_MODELS
from mlse.encoders.identity import BACKENDS
from mlse.runs.results import library_versions

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("words", "nospace", "cjk")
TARGETS = {"seconds": 10.0, "peak_rss_mb": 1024.0}
SHORT = "A man is playing a flute."
ORDINARY = [("A man plays the flute.", "A man is playing a flute.", "4.8"), ("A dog runs.", "The market fell.", "0.2")]
QUICK = {"mb": 2.0, "kinds": "words", "models": "minilm-en"}


def long_text(kind: str, mb: float, data_dir: str | None) -> str:
    """``mb`` MB (UTF-8) of FLORES devtest text of the given kind."""
    flores = require_subdir(resolve_data_dir(data_dir), "flores200_devtest")
    lang = "zho_Hans" if kind == "cjk" else "eng_Latn"
    lines = [s for s in (flores / f"{lang}.devtest").read_text(encoding="utf-8").split("\n") if s.strip()]
    unit = {"words": " ".join(lines) + " ", "nospace": "".join(lines).replace(" ", ""), "cjk": "".join(lines)}[kind]
    size = int(mb * 1e6)
    per_char = len(unit.encode("utf-8")) / len(unit)
    chars = int(size / per_char)
    return (unit * (chars // len(unit) + 1))[:chars]


def write_file(path: Path, first: str | None) -> Path:
    rows = ([(first, SHORT, "1.0")] if first is not None else []) + ORDINARY
    with open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write("sentence1\tsentence2\tscore\n")
        fh.writelines("\t".join(row) + "\n" for row in rows)
    return path


def linked_cache(root: Path, source: Path) -> Path:
    """A cache root linking every entry of ``source`` but its embedding cache: models warm, embeddings cold."""
    root.mkdir(parents=True)
    if source.is_dir():
        for entry in source.iterdir():
            if entry.name != "embeddings":
                (root / entry.name).symlink_to(entry.resolve())
    return root


# Starts the CLI and reports its wall time and peak RSS. A child's ru_maxrss counts its parent's memory at the fork
# (the kernel records the forked copy's RSS at exec), so a small process starts it, not this one (which has read and
# written 50 MB files).
LAUNCHER = """import resource, subprocess, sys, time
started = time.perf_counter()
code = subprocess.call(sys.argv[1:])
print(code, time.perf_counter() - started, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def run_cli(pairs: Path, out: Path, models: str, backend: str, env: dict) -> dict:
    """``python -m mlse score`` as a child: wall seconds, peak RSS, and whether progress bars reached its stderr."""
    cmd = [sys.executable, "-m", "mlse", "score", str(pairs), "--models", models, "--backend", backend]
    with tempfile.TemporaryFile("w+", encoding="utf-8") as err:
        proc = subprocess.run(
            [sys.executable, "-c", LAUNCHER, *cmd, "--out", str(out)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            check=True,
        )
        err.seek(0)
        log = err.read()
    code, seconds, max_rss_kib = proc.stdout.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {code}:\n" + "\n".join(log.splitlines()[-15:]))
    return {
        "seconds": round(float(seconds), 2),
        "peak_rss_mb": round(int(max_rss_kib) / 1024, 1),
        "bars_in_stderr": "\r" in log or "Batches" in log,
    }


def summary(runs: list[dict]) -> dict:
    """The fastest run's time (the least disturbed by other load), the largest peak RSS, every time."""
    return {
        "seconds": min(r["seconds"] for r in runs),
        "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
        "bars_in_stderr": any(r["bars_in_stderr"] for r in runs),
        "all_seconds": [r["seconds"] for r in runs],
    }


def first_cell(path: Path, tsv: bool = False) -> str:
    """The first data row's first cell of a scored CSV, or of a pairs TSV (the long field as it went in)."""
    csv.field_size_limit(CSV_FIELD_LIMIT)
    with open(path, encoding="utf-8", newline="") as fh:
        if tsv:
            fh.readline()
            return fh.readline().split("\t", 1)[0]
        reader = csv.reader(fh)
        next(reader)
        return next(reader)[0]


def markdown(result: dict) -> str:
    lines = [
        f"# One huge field: `mlse score` on a pairs file whose first sentence is {result['mb']:g} MB",
        "",
        f"`{result['command']}`" + (" (quick mode: proves the script runs)" if result["quick"] else ""),
        "",
        f"{result['created']}; CPU {result['cpu']} ({', '.join(result['isa']) or 'no AVX2'}), {result['cpus']} CPUs, "
        f"load average {result['load_average_at_start']:.1f} at start, {result['load_average_at_end']:.1f} at end"
        f"{', runs at nice -10' if result['reniced'] else ''}; models {result['models']}.",
        "",
        "| backend | file | wall time | peak RSS | long cell back intact | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for key, run in result["runs"].items():
        backend, name = key.split("/")
        verdict = "-" if name == "baseline" else ("PASS" if run["met"] else "FALL SHORT")
        intact = "-" if name == "baseline" else str(run["cell_intact"])
        lines.append(
            f"| {backend} | {name} | {run['seconds']:.1f} s | {run['peak_rss_mb']:,.0f} MiB | {intact} | {verdict} |"
        )
    lines += [
        "",
        f"Wall time: the fastest of {result['repeat']} run(s) (all of them in the JSON); peak RSS: the largest. "
        f"Targets: under {TARGETS['seconds']:g} s and {TARGETS['peak_rss_mb']:,.0f} MiB per long file.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.long_field", description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=float, default=50.0, help="size of the long field in MB of UTF-8")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, among {', '.join(KINDS)}")
    parser.add_argument("--models", default=None, help="comma-separated, as mlse score takes (default: its default)")
    parser.add_argument("--backends", default="torch", help=f"comma-separated, among {', '.join(BACKENDS)}")
    parser.add_argument(
        "--model-cache",
        type=Path,
        default=None,
        help="cache root whose converted and exported models are reused (default: MLSE_CACHE or the user's cache "
        "dir); its embeddings are never used",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per file: the fastest is reported, the largest RSS")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--out", default=None, help="folder (default results/long-field; --quick: a temporary one)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    if args.quick:  # the quick settings, except those given on the command line
        for key, value in QUICK.items():
            if getattr(args, key) == parser.get_default(key):
                setattr(args, key, value)
    if args.repeat < 1 or args.mb <= 0:
        raise SystemExit("--repeat must be at least 1 and --mb positive")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not backends or set(backends) - set(BACKENDS):
        raise SystemExit(f"--backends: expected some of {', '.join(BACKENDS)}, got {args.backends!r}")
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds or set(kinds) - set(KINDS):
        raise SystemExit(f"--kinds: expected some of {', '.join(KINDS)}, got {args.kinds!r}")
    models = args.models or ",".join(DEFAULT_MODELS)  # what mlse score scores with when no model is named
    out = output_dir(args.out, args.quick, "results/long-field", "long-field")
    command = "python -m benchmarks.long_field " + " ".join(sys.argv[1:] if argv is None else argv)
    result = {
        "benchmark": "long-field",
        "command": command.strip(),
        "quick": args.quick,
        "mb": args.mb,
        "models": models,
        "backends": backends,
        "repeat": args.repeat,
        "cpu": cpu_name(),
        "isa": isa_flags(),
        "cpus": os.cpu_count(),
        "mlse_threads": os.environ.get("MLSE_THREADS"),
        "load_average_at_start": os.getloadavg()[0],
        # the children inherit it; a quick run (the test suite) never raises its own priority
        "reniced": False if args.quick else renice(),
        "versions": library_versions(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "targets": TARGETS,
        "runs": {},
    }
    source = (args.model_cache or cache_root()).expanduser()
    with tempfile.TemporaryDirectory(prefix="mlse-long-field-") as tmp_name:
        tmp = Path(tmp_name)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
        baseline = write_file(tmp / "baseline.tsv", None)
        source.mkdir(parents=True, exist_ok=True)
        # written, then dropped: this process's memory is in each child's ru_maxrss until the child execs
        files = {name: write_file(tmp / f"{name}.tsv", long_text(name, args.mb, args.data_dir)) for name in kinds}
        for backend in backends:
            if not args.quick:  # conversions, exports, the weights' fingerprints: as a user's first run leaves them
                print(f"prepare {models} on {backend} (not timed)", flush=True)
                run_cli(baseline, tmp / "prepare.csv", models, backend, {**env, "MLSE_CACHE": str(source)})
            names = kinds if args.quick else ["baseline", *kinds]  # quick: one CLI run
            caches = {name: linked_cache(tmp / f"cache-{backend}-{name}", source) for name in names}
            runs: dict[str, list[dict]] = {name: [] for name in names}
            for _ in range(args.repeat):  # the files in turn, so that each meets the same load on a shared machine
                for name in names:
                    shutil.rmtree(caches[name] / "embeddings", ignore_errors=True)  # an empty embedding cache
                    pairs = baseline if name == "baseline" else files[name]
                    env_run = {**env, "MLSE_CACHE": str(caches[name])}
                    runs[name].append(run_cli(pairs, tmp / f"{name}.csv", models, backend, env_run))
            for name in names:
                result["runs"][f"{backend}/{name}"] = run = summary(runs[name])
                if name != "baseline":
                    run["file_bytes"] = files[name].stat().st_size
                    run["cell_intact"] = first_cell(tmp / f"{name}.csv") == first_cell(files[name], tsv=True)
                    run["met"] = (
                        run["seconds"] < TARGETS["seconds"]
                        and run["peak_rss_mb"] < TARGETS["peak_rss_mb"]
                        and run["cell_intact"]
                    )
                print(
                    f"  {backend}, {name}: {run['seconds']:.1f} s, peak RSS {run['peak_rss_mb']:,.0f} MiB", flush=True
                )
    result["load_average_at_end"] = os.getloadavg()[0]
    atomic_write_text(out / "long-field.json", json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    report = markdown(result)
    atomic_write_text(out / "long-field.md", report)
    print("\n" + report)
    print(f"wrote {out / 'long-field.json'} and {out / 'long-field.md'}")


if __name__ == "__main__":
    main()
