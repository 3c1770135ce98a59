"""Every module of the ``benchmarks`` package imports cleanly (a renamed helper in one benchmark once broke two others
unnoticed).

Importing each one (a script's work sits behind ``if __name__ == "__main__"``) catches a missing name, a bad import
or a syntax error in a second, for every script including those whose quick run is slow or not there yet;
tests/project/test_benchmarks_quick.py runs them. Each is imported as ``python -m benchmarks.NAME`` finds it, from the
repository root, with no ``sys.path`` edit.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

import pytest

from tests.paths import REPO_ROOT as ROOT

BENCHMARKS = ROOT / "benchmarks"


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_script(module: str) -> bool:
    """A runnable benchmark: a module directly under benchmarks/, not a helper (``common``, ``_*``)."""
    name = module.split(".")
    return len(name) == 2 and name[1] != "common" and not name[1].startswith("_")


MODULES = sorted(_module(p) for p in BENCHMARKS.rglob("*.py"))


@pytest.mark.parametrize("module", MODULES)
def test_benchmark_imports(module, monkeypatch):
    monkeypatch.setattr(sys, "argv", [f"python -m {module}"])
    imported = importlib.import_module(module)
    if _is_script(module):
        assert callable(getattr(imported, "main", None)), f"{module} has no main()"
    else:
        assert not hasattr(imported, "main"), f"{module} is a helper module: it has no main()"


def test_every_script_is_found():
    scripts = [m for m in MODULES if _is_script(m)]
    assert "benchmarks.mining_scale" in scripts and "benchmarks.common" not in scripts and len(scripts) >= 20


OLD_FORM = re.compile(r"\bpython3? +benchmarks/\w+\.py")  # how the scripts ran before they were a package


def test_every_script_says_how_it_runs_as_a_module():
    """A script's docstring and ``--help`` name ``python -m benchmarks.NAME``; no page, script or library message still
    tells anyone to run ``python benchmarks/NAME.py`` (the result files under results/ keep the commands they ran)."""
    for module in (m for m in MODULES if _is_script(m)):
        imported = importlib.import_module(module)
        assert f"python -m {module}" in (imported.__doc__ or ""), f"{module}'s docstring does not say how it runs"
        assert f'prog="python -m {module}"' in inspect.getsource(imported), f"{module}'s --help names another command"
    texts = [
        ROOT / "README.md",
        ROOT / "CONTRIBUTING.md",
        *(ROOT / "docs").rglob("*.md"),
        *BENCHMARKS.rglob("*.py"),
        *(ROOT / "mlse").rglob("*.py"),
    ]
    stale = [str(p.relative_to(ROOT)) for p in texts if OLD_FORM.search(p.read_text(encoding="utf-8"))]
    assert not stale, stale
