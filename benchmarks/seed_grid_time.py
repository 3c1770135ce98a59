"""Time the seed grid from a cold embedding cache and again warm, in fresh processes.

    python -m benchmarks.seed_grid_time [--backbone minilm-en] [--max-pairs 2000] [--out results/seed-grid/minilm-en]
    python -m benchmarks.seed_grid_time --quick [--backbone PATH]   # 20 pairs, 1 Stage-1 epoch: proves it runs

Targets: under 20 minutes cold and under 5 minutes warm on 2 CPU cores for minilm-en. The warm run's
outputs (``--out``, by default the experiment's own ``results/seed-grid/<backbone>/``) are the ones the README shows;
both runs train the same seeded heads. The times go to ``<out>/seed-grid-time.json`` with the command, the CPU and its
ISA flags. ``--quick`` (:data:`QUICK`) writes to a temporary folder unless ``--out`` is given.
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

from benchmarks.common import QUICK_HELP, machine, output_dir
from mlse.atomic import atomic_write_text

QUICK = {"max_pairs": "20", "s1_max_epochs": "1"}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.seed_grid_time", description=__doc__.split("\n")[0])
    parser.add_argument("--backbone", default="minilm-en")
    parser.add_argument("--max-pairs", default="2000")
    parser.add_argument("--s1-max-epochs", default=None, help="Stage 1 epochs (default: the experiment's)")
    parser.add_argument(
        "--out",
        default=None,
        help="the experiment's results folder (default its own, "
        "results/seed-grid/<backbone>; --quick: a temporary folder)",
    )
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args(argv)
    if args.quick:
        args.max_pairs, args.s1_max_epochs = QUICK["max_pairs"], QUICK["s1_max_epochs"]
    name = Path(args.backbone).name if Path(args.backbone).is_absolute() else args.backbone
    out = output_dir(args.out, args.quick, Path("results") / "seed-grid" / name, "seed-grid-time")
    cmd = [
        sys.executable,
        "-m",
        "mlse",
        "-q",
        "experiment",
        "seed-grid",
        "--backbone",
        args.backbone,
        "--max-pairs",
        args.max_pairs,
        "--out",
        str(out),
    ]
    cmd += ["--s1-max-epochs", args.s1_max_epochs] if args.s1_max_epochs else []
    times = []
    with tempfile.TemporaryDirectory() as cache, tempfile.TemporaryDirectory() as runs:
        env = {**os.environ, "MLSE_CACHE": cache, "MLSE_RUNS": runs}
        for label in ("cold", "warm"):
            t0 = time.perf_counter()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL if label == "cold" else None)
            times.append(time.perf_counter() - t0)
            print(f"{label}: {times[-1]:.0f} s", flush=True)
    result = {
        "benchmark": "seed-grid-time",
        "quick": args.quick,
        "command": " ".join(cmd[1:]),
        **machine(),
        "cold_s": round(times[0], 1),
        "warm_s": round(times[1], 1),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    atomic_write_text(out / "seed-grid-time.json", json.dumps(result, indent=1) + "\n")
    print(f"\n| seed grid ({args.backbone}, --max-pairs {args.max_pairs}) | cold cache | warm cache |")
    print(
        f"|---|---:|---:|\n| wall time, {os.cpu_count()} CPU cores | {times[0] / 60:.1f} min | "
        f"{times[1] / 60:.1f} min |"
    )
    print(f"wrote {out / 'seed-grid-time.json'}")


if __name__ == "__main__":
    main()
