"""The package's shape: importing mlse stays cheap, no import cycle among its modules, no module too long to read; and
the benchmarks package held to the same bar (scripts run as ``python -m benchmarks.NAME``, imports one way)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

from tests.ci import missing
from tests.paths import REPO_ROOT as ROOT

CYCLES = ROOT.parent / "shared" / "tools" / "import_cycles.py"  # ../shared beside the checkout, as in CI
MAX_LINES = 400
# the root holds the public API and what every part uses (stop_signal: data, train, serving); the rest sits in packages
MAX_ROOT_MODULES = 13


def test_import_mlse_loads_no_heavy_library():
    code = "import sys, mlse; print(sorted(m for m in ('torch', 'gradio', 'umap', 'plotly') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_command_line_and_the_training_package_start_without_torch():
    """``python -m mlse`` and the fine-tune tab import the training package; torch loads only when a run starts."""
    modules = (
        "mlse.cli.main",
        "mlse.train.jobs",
        "mlse.train.finetune",
        "mlse.train.head_training",
        "mlse.ui.finetune_tab",
    )
    code = (
        f"import sys, importlib; [importlib.import_module(m) for m in {modules!r}]; "
        "print(sorted(m for m in ('torch', 'sentence_transformers', 'transformers', 'peft') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_layer_contracts_hold():
    """pyproject.toml's [tool.importlinter] contracts: only mlse.ui imports gradio or the UI, and the packages' layers
    (ui and cli over serving over experiments over train ... over data) import only downwards."""
    lint_imports = Path(sys.executable).with_name("lint-imports")  # import-linter's command, beside this python
    run = subprocess.run([str(lint_imports)], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]


def test_no_import_cycle():
    if not CYCLES.is_file():
        missing(f"{CYCLES} not found (../shared is not beside this checkout; CI has it)")
    run = subprocess.run([sys.executable, str(CYCLES), str(ROOT / "mlse")], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


def test_no_module_over_400_lines():
    long = {
        str(p.relative_to(ROOT / "mlse")): n
        for p in (ROOT / "mlse").rglob("*.py")
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_package_root_holds_few_modules():
    root = sorted(p.name for p in (ROOT / "mlse").glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root
    assert {"__init__.py", "__main__.py", "api.py", "models.py"} <= set(root)


def test_public_api_names_resolve_lazily():
    """Every name ``mlse`` exports is defined where the package says, and none is loaded before it is asked for."""
    code = (
        "import sys, mlse; lazy = [n for n in mlse.__all__ if n not in vars(mlse)]; "
        "missing = [n for n in lazy if getattr(mlse, n, None) is None]; print(len(lazy), missing)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    count, missing = out.stdout.split(" ", 1)
    assert int(count) >= 5 and missing.strip() == "[]", out.stdout


# -- benchmarks/: the same bar as mlse/ ------------------------------------------------------------------------------

BENCHMARKS = ROOT / "benchmarks"


def _benchmark_modules() -> dict[str, Path]:
    """Dotted name -> file of every module in the benchmarks package (``benchmarks.common`` for its ``__init__``)."""
    out = {}
    for path in BENCHMARKS.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _is_script(module: str) -> bool:
    """A runnable benchmark (``python -m benchmarks.NAME``): directly in benchmarks/, neither common nor ``_*``."""
    parts = module.split(".")
    return len(parts) == 2 and parts[1] != "common" and not parts[1].startswith("_")


def _imported(path: Path) -> set[str]:
    """Every module a file imports, at the top or inside a function (``from x import y`` counts as x and x.y)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_benchmarks_is_a_package_of_scripts():
    modules = _benchmark_modules()
    assert (BENCHMARKS / "__init__.py").is_file() and "benchmarks.common" in modules
    scripts = [m for m in modules if _is_script(m)]
    assert "benchmarks.mining_scale" in scripts and len(scripts) >= 20, scripts


def test_no_benchmark_module_over_400_lines():
    long = {
        m: n
        for m, p in _benchmark_modules().items()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not long, long


def test_no_import_cycle_in_benchmarks():
    if not CYCLES.is_file():
        missing(f"{CYCLES} not found (../shared is not beside this checkout; CI has it)")
    run = subprocess.run([sys.executable, str(CYCLES), str(BENCHMARKS)], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout == "", run.stdout + run.stderr


def test_benchmarks_import_one_way_without_path_edits():
    """Scripts run as ``python -m benchmarks.NAME`` from the root, so none edits ``sys.path``; a script imports the
    shared helpers (``benchmarks.common``) and its own ``benchmarks._*`` modules, never another script; a helper never
    imports a script; and the library never imports a benchmark."""
    modules = _benchmark_modules()
    scripts = {m for m in modules if _is_script(m)}
    for module, path in modules.items():
        text = path.read_text(encoding="utf-8")
        assert "sys.path" not in text, f"{module} edits sys.path"
        borrowed = {name for name in _imported(path) if name in scripts and name != module}
        assert not borrowed, f"{module} imports the script(s) {sorted(borrowed)}: move what they share to common"
    for path in (ROOT / "mlse").rglob("*.py"):
        uses = {name for name in _imported(path) if name.split(".")[0] == "benchmarks"}
        assert not uses, f"{path.relative_to(ROOT)} imports {sorted(uses)}"


def test_the_shared_benchmark_helpers_load_no_heavy_library():
    """``benchmarks.common`` is imported by every script, the light ones too (and by their worker processes)."""
    code = (
        "import sys, benchmarks.common; "
        "print(sorted(m for m in ('torch', 'gradio', 'umap', 'plotly', 'faiss') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# -- one style, checked: the formatter and the linter as pyproject.toml configures them -------------------------------


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ruff", *args], capture_output=True, text=True, cwd=ROOT)


def test_the_code_is_formatted_and_lint_clean():
    """``ruff format`` owns the layout of every Python file (no hand-kept exceptions) and ``ruff check`` passes."""
    fmt = _ruff("format", "--check", ".")
    assert fmt.returncode == 0, "run `ruff format .`:\n" + fmt.stdout + fmt.stderr
    lint = _ruff("check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr


# the formatter's exemption comments, spelled so that this file does not hold them
EXEMPTIONS = re.compile(r"#\s*fmt:\s*(skip|off)\b".replace(":", "[:]"))


def test_no_formatter_exceptions():
    """No formatter exemptions (fmt skip / off comments): a line the formatter would spoil is rewritten instead."""
    marked = []
    for path in ROOT.rglob("*.py"):
        if any(part in {"site", "__pycache__"} or part.startswith(".") for part in path.relative_to(ROOT).parts):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if EXEMPTIONS.search(line):
                marked.append(f"{path.relative_to(ROOT)}:{n}")
    assert not marked, marked
