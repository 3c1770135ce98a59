"""How long ``python -m mlse warm`` takes from an empty cache, step by step, and that a second run does nothing.

    python -m benchmarks.warm_start [--backend torch] [--data-dir DIR] [--out results/app/warm-start-<backend>.json]
                                    [--quick]

Runs the command twice in its own processes on a fresh ``MLSE_CACHE`` (a temporary folder, removed after; offline):
the first run computes every step the app's tabs need (the default models' files, the example pairs' embeddings, the
default STS pair, Tatoeba language and map), the second must find everything warm. For each run: wall seconds, the
CPU seconds of the process (user + system: less sensitive to a shared machine's load than wall time) and its exit
code; for the first, each step's outcome and seconds as the command printed them. The target: <= 10 minutes on
2 cores. Writes the JSON and a Markdown table next to it (same stem); the JSON records the CPU, ISA flags, core count
and load average.

``--quick``: minilm-en only, with an empty data folder (the data steps are skipped), written to a temporary folder
unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import QUICK_HELP, machine, output_file
from mlse.atomic import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 600.0
QUICK_MODEL = "minilm-en"
STEP = re.compile(
    r"\[\s*(\d+) %\] (.+?): (already warm|computed in ([\d.]+) s|skipped: (.*)|failed after .*|"
    r"stopped after .*)$"
)


def run_warm(command: list[str], env: dict) -> dict:
    """One run of the command: its wall and CPU seconds, exit code and the step lines it printed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    steps = []
    for line in done.stdout.splitlines():
        match = STEP.match(line.strip())
        if match:
            outcome = match.group(3).split(":")[0].split(" in ")[0].split(" after ")[0]
            steps.append(
                {
                    "step": match.group(2),
                    "outcome": outcome,
                    "percent": int(match.group(1)),
                    "seconds": float(match.group(4)) if match.group(4) else None,
                    "note": match.group(5) or "",
                }
            )
    lines = done.stdout.strip().splitlines()
    return {
        "rc": done.returncode,
        "seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "steps": steps,
        "last_line": lines[-1] if lines else "",
        "stderr_tail": done.stderr.strip().splitlines()[-5:],
    }


def markdown(report: dict) -> str:
    first, second = report["first"], report["second"]
    rows = ["| step | outcome | seconds |", "|---|---|---:|"]
    rows += [
        f"| {s['step']} | {s['outcome']}{': ' + s['note'] if s['note'] else ''} | "
        f"{'' if s['seconds'] is None else s['seconds']} |"
        for s in first["steps"]
    ]
    m = report["machine"]
    return "\n".join(
        [
            f"# `python -m mlse warm --backend {report['backend']}` from an empty cache",
            "",
            f"Command: `{report['command']}`. {m['cpu']} ({', '.join(m['isa'])}), {m['cpus']} CPUs, load average "
            f"{m['load_average']:.1f} at the start and {report['load_average_end']:.1f} at the end (a shared machine: "
            "wall times move with its load; CPU seconds less so).",
            "",
            f"First run: **{first['seconds']:.0f} s** wall, {first['cpu_seconds']:.0f} CPU s, exit {first['rc']} "
            f"(target <= {TARGET_S / 60:.0f} min on 2 cores). Second run: {second['seconds']:.1f} s wall, "
            f"{second['cpu_seconds']:.1f} CPU s, exit {second['rc']}: {second['last_line']}",
            "",
            *rows,
            "",
        ]
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.warm_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", default="torch", choices=("torch", "onnx", "onnx-int8"))
    parser.add_argument("--data-dir", default=None, help="datasets folder (default: the one mlse finds)")
    parser.add_argument("--out", default=None, help="JSON to write (default: results/app/warm-start-<backend>.json)")
    parser.add_argument("--quick", action="store_true", help=QUICK_HELP)
    args = parser.parse_args()
    out = output_file(args.out, args.quick, ROOT / "results" / "app" / f"warm-start-{args.backend}.json")
    scratch = Path(tempfile.mkdtemp(prefix="mlse-warm-start-"))
    command = [sys.executable, "-m", "mlse", "warm", "--backend", args.backend]
    if args.quick:
        (scratch / "no-data").mkdir()
        command += ["--models", QUICK_MODEL, "--data-dir", str(scratch / "no-data")]
    elif args.data_dir:
        command += ["--data-dir", args.data_dir]
    env = {**os.environ, "MLSE_CACHE": str(scratch / "cache"), "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    report = {
        "backend": args.backend,
        "command": "python -m benchmarks.warm_start " + " ".join(sys.argv[1:]),
        "warm_command": " ".join(["python", *command[1:]]),
        "machine": machine(),
        "target_s": TARGET_S,
    }
    try:
        for run in ("first", "second"):
            print(f"{run} run: {' '.join(command[1:])} (MLSE_CACHE={env['MLSE_CACHE']})", flush=True)
            report[run] = run_warm(command, env)
            print(f"  rc {report[run]['rc']} in {report[run]['seconds']} s: {report[run]['last_line']}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report["load_average_end"] = os.getloadavg()[0]
    report["second_run_did_nothing"] = report["second"]["rc"] == 0 and report["second"]["last_line"].startswith(
        "everything is already warm"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, json.dumps(report, indent=1) + "\n")
    atomic_write_text(out.with_suffix(".md"), markdown(report))
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0 if report["first"]["rc"] == 0 and report["second_run_did_nothing"] else 1


if __name__ == "__main__":
    sys.exit(main())
