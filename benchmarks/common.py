"""Helpers every benchmark shares: the machine it ran on, and where a ``--quick`` run writes.

- :func:`cpu_name`, :func:`isa_flags`: the CPU model and the vector-instruction flags that decide int8 and BLAS speed
  (every result records them, so a number is never read without its machine); :func:`machine` adds the core count
  and the load average (the machine may be shared: absolute times move with its load).
- :func:`renice`: raise this process's threads to nice -10 where permitted (timed comparisons only).
- :func:`output_dir` / :func:`output_file`: ``--out`` when given, else a fresh temporary folder in quick mode (a quick
  run proves a script works on tiny inputs; it never writes over ``results/``), else the benchmark's default.

Not a benchmark itself (no ``main``): ``tests/test_benchmarks_quick.py`` runs every other ``benchmarks/*.py``.
"""

from __future__ import annotations

import os
import platform
import tempfile
from pathlib import Path

ISA_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_tile",
             "amx_int8")  # fmt: skip
QUICK_HELP = "tiny inputs, the same code paths: seconds, proves the script runs (numbers mean nothing)"


def _cpuinfo_lines() -> list[str]:
    try:
        return Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return []


def isa_flags() -> list[str]:
    """The vector-instruction flags that decide int8 speed (VNNI or not), as /proc/cpuinfo lists them."""
    for line in _cpuinfo_lines():
        if line.startswith("flags"):
            present = set(line.split(":", 1)[1].split())
            return [f for f in ISA_FLAGS if f in present]
    return []


def cpu_name() -> str:
    for line in _cpuinfo_lines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def machine() -> dict:
    """CPU model, ISA flags, core count and the 1-minute load average, as a result records them."""
    return {"cpu": cpu_name(), "isa": isa_flags(), "cpus": os.cpu_count(), "load_average": os.getloadavg()[0]}


def renice() -> bool:
    """Raise this process's threads (and those it starts later) to nice -10; False where not permitted."""
    try:
        for tid in os.listdir("/proc/self/task"):
            os.setpriority(os.PRIO_PROCESS, int(tid), -10)
        return True
    except (OSError, PermissionError):
        return False


def output_dir(out: str | Path | None, quick: bool, default: str | Path, name: str = "benchmark") -> Path:
    """The folder a benchmark writes to: ``out`` if given; in quick mode a new temporary folder; else ``default``."""
    if out:
        return Path(out)
    if quick:
        return Path(tempfile.mkdtemp(prefix=f"mlse-{name}-quick-"))
    return Path(default)


def output_file(out: str | Path | None, quick: bool, default: str | Path) -> Path:
    """Like :func:`output_dir` for a benchmark whose ``--out`` names one file: in quick mode the default's file name
    inside a new temporary folder."""
    if out:
        return Path(out)
    default = Path(default)
    if quick:
        return output_dir(None, True, "", default.stem) / default.name
    return default
