"""Time the same `eval` twice in fresh processes sharing a fresh embedding cache: cold, then fully cache-served.

    python benchmarks/cache_speedup.py [--pairs en-en,en-de,en-ru,de-fr] [--model minilm-en]

Wall-clock times include process start-up and imports, as a user experiences them.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return time.perf_counter() - t0, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="minilm-en")
    parser.add_argument("--pairs", default="en-en,en-de,en-ru,de-fr")
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "mlse", "eval", "--model", args.model, "--task", "sts", "--pairs", args.pairs]
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "MLSE_CACHE": cache}
        first, out1 = run_once(cmd, env)
        second, out2 = run_once(cmd, env)
    counts = [re.search(r"encoded (\d+) texts, served (\d+)", o).groups() for o in (out1, out2)]
    print("| run | wall time | texts encoded | texts served from cache |\n|---|---:|---:|---:|")
    print(f"| first (cold cache) | {first:.1f} s | {counts[0][0]} | {counts[0][1]} |")
    print(f"| second (same command) | {second:.1f} s | {counts[1][0]} | {counts[1][1]} |")
    print(f"\nspeed-up: {first / second:.0f}x  ({' '.join(cmd[1:])})")


if __name__ == "__main__":
    main()
