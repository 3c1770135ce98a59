"""Time the same `eval` twice in fresh processes sharing a fresh embedding cache: cold, then fully cache-served.

    python -m benchmarks.cache_speedup [--pairs en-en,en-de,en-ru,de-fr] [--model minilm-en] [--out results/cache]
    python -m benchmarks.cache_speedup --quick [--model PATH]     # one STS pair: proves the script runs

Wall-clock times include process start-up and imports, as a user experiences them. Writes ``<out>/cache-speedup.json``
(with the command, the CPU and its ISA flags) and prints a Markdown table; ``--quick`` writes to a temporary folder
unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from benchmarks.common import QUICK_HELP, machine, output_dir
from mlse.atomic import atomic_write_text


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t0, proc.stdout


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cache_speedup", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm-en")
    parser.add_argument("--pairs", default=None, help="default en-en,en-de,en-ru,de-fr (--quick: en-en)")
    parser.add_argument("--out", default=None, help="folder (default results/cache; --quick: a temporary folder)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    pairs = args.pairs or ("en-en" if args.quick else "en-en,en-de,en-ru,de-fr")
    out = output_dir(args.out, args.quick, "results/cache", "cache-speedup")
    cmd = [sys.executable, "-m", "mlse", "eval", "--model", args.model, "--task", "sts", "--pairs", pairs]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "MLSE_CACHE": cache}
        first, out1 = run_once(cmd, env)
        second, out2 = run_once(cmd, env)
    counts = [re.search(r"encoded (\d+) texts, served (\d+)", o).groups() for o in (out1, out2)]
    result = {
        "benchmark": "cache-speedup",
        "quick": args.quick,
        "command": " ".join(cmd[1:]),
        **machine(),
        "cold_s": round(first, 2),
        "warm_s": round(second, 2),
        "speedup": round(first / second, 1),
        "encoded": [int(c[0]) for c in counts],
        "served": [int(c[1]) for c in counts],
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    atomic_write_text(out / "cache-speedup.json", json.dumps(result, indent=1) + "\n")
    print("| run | wall time | texts encoded | texts served from cache |\n|---|---:|---:|---:|")
    print(f"| first (cold cache) | {first:.1f} s | {counts[0][0]} | {counts[0][1]} |")
    print(f"| second (same command) | {second:.1f} s | {counts[1][0]} | {counts[1][1]} |")
    print(f"\nspeed-up: {first / second:.0f}x  ({' '.join(cmd[1:])})")
    print(f"wrote {out / 'cache-speedup.json'}")


if __name__ == "__main__":
    main()
