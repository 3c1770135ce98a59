"""A skip under CI fails (tests/no_silent_skips.py); on a workstation it stays a skip."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.no_silent_skips import fail_skip_under_ci


def report(outcome: str, **extra) -> SimpleNamespace:
    longrepr = ("tests/ui/test_x.py", 3, "Skipped: chromium is not installed") if outcome == "skipped" else None
    return SimpleNamespace(outcome=outcome, skipped=outcome == "skipped", longrepr=longrepr, **extra)


@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_a_skip_fails_under_ci(monkeypatch, ci):
    monkeypatch.setenv("CI", ci)
    skipped = report("skipped")
    assert fail_skip_under_ci(skipped)
    assert skipped.outcome == "failed" and "chromium is not installed" in skipped.longrepr


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_a_skip_stays_a_skip_on_a_workstation(monkeypatch, ci):
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    skipped = report("skipped")
    assert not fail_skip_under_ci(skipped) and skipped.outcome == "skipped"


def test_passes_and_expected_failures_are_left_alone(monkeypatch):
    monkeypatch.setenv("CI", "true")
    passed, xfailed = report("passed"), report("skipped", wasxfail="a known bug")
    assert not fail_skip_under_ci(passed) and passed.outcome == "passed"
    assert not fail_skip_under_ci(xfailed) and xfailed.outcome == "skipped"


def test_the_hook_is_installed(pytestconfig):
    """tests/conftest.py applies it to every report of this session."""
    import tests.conftest as conftest

    assert pytestconfig.pluginmanager.is_registered(conftest)
    assert "fail_skip_under_ci" in conftest.pytest_runtest_makereport.__code__.co_names
