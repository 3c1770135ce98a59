"""Time the seed grid from a cold embedding cache and again warm, in fresh processes.

    python benchmarks/seed_grid_time.py [--backbone minilm-en] [--max-pairs 2000]

Targets (issue 3): under 20 minutes cold and under 5 minutes warm on 2 CPU cores for minilm-en. The warm run's
outputs (results/seed-grid/<backbone>/) are the ones the README shows; both runs train the same seeded heads.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backbone", default="minilm-en")
    parser.add_argument("--max-pairs", default="2000")
    args = parser.parse_args()
    cmd = [sys.executable, "-m", "mlse", "-q", "experiment", "seed-grid", "--backbone", args.backbone,
           "--max-pairs", args.max_pairs]  # fmt: skip
    times = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as runs:
        env = {**os.environ, "MLSE_CACHE": cache, "MLSE_RUNS": runs}
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL if label == "cold" else None)
            times.append(time.perf_counter() - t0)
            print(f"{label}: {times[-1]:.0f} s", flush=True)
    print(f"\n| seed grid ({args.backbone}, --max-pairs {args.max_pairs}) | cold cache | warm cache |")
    print(f"|---|---:|---:|\n| wall time, 2 CPU cores | {times[0] / 60:.1f} min | {times[1] / 60:.1f} min |")


if __name__ == "__main__":
    main()
