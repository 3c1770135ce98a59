"""Where things are, for every test whatever folder it lives in (tests/<package>/test_*.py mirror mlse's packages).

A test names the repository's files through these instead of counting ``Path(__file__).parents``, which breaks each
time a test moves a folder deeper or up.
"""

from __future__ import annotations

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent  # tests/
REPO_ROOT = TESTS_DIR.parent  # the checkout: mlse/, assets/, docs/, benchmarks/
FIXTURES = TESTS_DIR / "fixtures"  # files the tests read: runs made by old code, pinned training numbers
EXAMPLES = REPO_ROOT / "assets" / "examples"  # the example files the app offers
