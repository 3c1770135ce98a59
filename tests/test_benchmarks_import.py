"""Every benchmark script imports cleanly (a renamed helper in one benchmark once broke two others unnoticed).

Importing each one (their work sits behind ``if __name__ == "__main__"``) catches a missing name, a bad import or a
syntax error in a second, for every script including those whose quick run is slow or not there yet;
tests/test_benchmarks_quick.py runs them.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


SHARED = {"common"}  # helper modules the scripts import (no main), like every benchmarks/_*.py


@pytest.mark.parametrize("script", sorted(p.stem for p in BENCHMARKS.glob("*.py")))
def test_benchmark_imports(script, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # benchmarks import each other by module name
    monkeypatch.setattr(sys, "argv", [script])
    module = importlib.import_module(script)
    if script in SHARED or script.startswith("_"):
        return
    assert callable(getattr(module, "main", None)), f"benchmarks/{script}.py has no main()"
