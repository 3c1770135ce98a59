""".ci/run: the fast suite always, the slow tier too when ``MLSE_SLOW=1``, and ``CI`` set so that a skip fails.

The script runs with stand-ins for ``python`` and ``apt-get`` first on the PATH, which write down how they were called
and succeed: what is checked is which commands the script runs, not the suite itself.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

from tests.paths import REPO_ROOT as ROOT

RECORDER = '#!/bin/sh\necho "$(basename "$0") CI=$CI $*" >> "$CALLS"\n'


def ci_run(tmp_path: Path, **env: str) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python", "apt-get", "sudo"):
        (bin_dir / name).write_text(RECORDER)
        (bin_dir / name).chmod(stat.S_IRWXU)
    calls = tmp_path / "calls.txt"
    base = {k: v for k, v in os.environ.items() if k not in ("CI", "MLSE_SLOW")}
    run_env = {**base, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "CALLS": str(calls), **env}
    done = subprocess.run(["bash", str(ROOT / ".ci" / "run")], capture_output=True, text=True, env=run_env, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in calls.read_text().splitlines() if line.startswith("python")]


def test_the_fast_suite_only_by_default(tmp_path):
    calls = ci_run(tmp_path)
    assert calls[-1] == "python CI=true -m pytest -q"
    assert not any("-m slow" in c for c in calls)
    assert calls[0].startswith("python CI=true -m pip install -q -r requirements.txt -c constraints.txt")


def test_mlse_slow_adds_the_slow_tier(tmp_path):
    calls = ci_run(tmp_path, MLSE_SLOW="1")
    assert calls[-2:] == ["python CI=true -m pytest -q", "python CI=true -m pytest -q -m slow"]


def test_the_slow_marker_selects_what_the_default_run_leaves_out():
    """pyproject's addopts deselect ``slow``; a later ``-m slow`` on the command line replaces that expression."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "addopts = \"-m 'not slow'" in text and '"slow: ' in text
