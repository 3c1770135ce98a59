"""The package's shape: importing mlse stays cheap, no import cycle among its modules, no module too long to read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CYCLES = ROOT.parent / "shared" / "tools" / "import_cycles.py"  # ../shared beside the checkout, as in CI
MAX_LINES = 400
MAX_ROOT_MODULES = 12  # the root holds the public API and what every part uses; the rest sits in packages


def test_import_mlse_loads_no_heavy_library():
    code = "import sys, mlse; print(sorted(m for m in ('torch', 'gradio', 'umap', 'plotly') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_command_line_and_the_training_package_start_without_torch():
    """``python -m mlse`` and the fine-tune tab import the training package; torch loads only when a run starts."""
    modules = ("mlse.cli.main", "mlse.train.jobs", "mlse.train.finetune", "mlse.train.head_training",
               "mlse.ui.finetune_tab")
    code = (f"import sys, importlib; [importlib.import_module(m) for m in {modules!r}]; "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'peft') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_no_import_cycle():
    if not CYCLES.is_file():
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{CYCLES} is missing: CI must have ../shared beside the checkout")
        pytest.skip(f"{CYCLES} not found (../shared is not beside this checkout)")
    run = subprocess.run([sys.executable, str(CYCLES), str(ROOT / "mlse")], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


def test_no_module_over_400_lines():
    long = {str(p.relative_to(ROOT / "mlse")): n for p in (ROOT / "mlse").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}  # fmt: skip
    assert not long, long


def test_package_root_holds_few_modules():
    root = sorted(p.name for p in (ROOT / "mlse").glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    assert {"__init__.py", "__main__.py", "api.py", "models.py"} <= set(root)


def test_public_api_names_resolve_lazily():
    """Every name ``mlse`` exports is defined where the package says, and none is loaded before it is asked for."""
    code = ("import sys, mlse; lazy = [n for n in mlse.__all__ if n not in vars(mlse)]; "
            "missing = [n for n in lazy if getattr(mlse, n, None) is None]; print(len(lazy), missing)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    count, missing = out.stdout.split(" ", 1)
    assert int(count) >= 5 and missing.strip() == "[]", out.stdout
