"""Shared fixture for the data tests (tests/conftest.py belongs to another module's owner).

Use with ``from tests.conftest_data import data_dir  # noqa: F401``. The tests read the real datasets;
if they are missing, the fixture fails loudly rather than skipping, so a green run means they ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mlse.data.paths import resolve_data_dir


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return resolve_data_dir()
