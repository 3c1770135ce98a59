"""Every benchmark script imports cleanly (a renamed helper in one benchmark once broke two others unnoticed).

The benchmarks run minutes to hours, so the default test run cannot execute them; importing each one (their work sits
behind ``if __name__ == "__main__"``) still catches a missing name, a bad import or a syntax error.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("script", sorted(p.stem for p in BENCHMARKS.glob("*.py")))
def test_benchmark_imports(script, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # benchmarks import each other by module name
    monkeypatch.setattr(sys, "argv", [script])
    module = importlib.import_module(script)
    assert callable(getattr(module, "main", None)), f"benchmarks/{script}.py has no main()"
