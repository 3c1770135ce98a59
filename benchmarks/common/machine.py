"""The machine a benchmark ran on, as every result records it, and the priority its timed threads run at.

- :func:`cpu_name`, :func:`isa_flags`: the CPU model and the vector-instruction flags that decide int8 and BLAS speed
  (every result records them, so a number is never read without its machine); :func:`machine` adds the core count
  and the load average (the machine may be shared: absolute times move with its load).
- :func:`renice`: raise this process's threads to nice -10 where permitted (timed comparisons only).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

ISA_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "avx512f",
    "avx512bw",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_tile",
    "amx_int8",
)


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
