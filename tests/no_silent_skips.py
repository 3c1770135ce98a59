"""Under CI a skipped test is a failure (tests/conftest.py applies :func:`fail_skip_under_ci` to every report).

.ci/run installs every requirement and the browser and runs beside ../shared, so under CI nothing a test needs is
missing: a skip there would report green without the test having run. On a workstation a skip stays a skip (named in
the summary, with its reason), as :func:`tests.ci.missing` makes it. An expected failure (xfail) is no skip.
"""

from __future__ import annotations

from tests.ci import in_ci


def fail_skip_under_ci(report) -> bool:
    """Turn a skipped ``report`` (a pytest TestReport) into a failure when running under CI; True when it did."""
    if not (report.skipped and in_ci()) or hasattr(report, "wasxfail"):
        return False
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under CI, where nothing may be missing: {reason}"
    return True
