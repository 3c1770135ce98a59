"""benchmarks/first_result.py: its summaries on hand-made samples (fast), and its quick run in a real browser (slow)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from benchmarks._first_result_report import markdown, verdict
from benchmarks.first_result import STEPS, progress_summary
from tests.browser import TABS, missing_browser
from tests.ci import missing
from tests.paths import REPO_ROOT as ROOT


def sample(t: float, timer: str = "", described: str = "", busy: int = 1) -> dict:
    return {"t": t, "busy": busy, "timer": [timer] if timer else [], "described": [described] if described else []}


def test_progress_shown_throughout_or_with_its_longest_gap():
    steady = [sample(t / 2, "processing | 1s", "loading me5-small: 30%") for t in range(0, 9)]
    summary = progress_summary(steady, 4.0)
    assert summary["throughout"] and summary["visible_share"] == 1.0 and summary["longest_gap_s"] == 0.0
    assert summary["messages"] == ["loading me5-small: 30%"]  # a description wins over the bare clock
    gappy = [
        sample(0.5, "processing | 0.5s"),
        sample(1.0),
        sample(1.5),
        sample(2.0, busy=0),
        sample(2.5, "processing | 2s"),
    ]
    summary = progress_summary(gappy, 3.0)
    assert not summary["throughout"] and summary["visible_share"] == 0.4 and summary["longest_gap_s"] == 1.5
    assert summary["indicator_share"] == 0.8  # a spinner without text counts as an indicator, not as a message
    assert summary["messages"] == ["processing"]  # the clock is cut off the status text
    assert summary["timeline"] == [[0.5, 1, ["processing"]], [1.0, 1, []], [2.0, 0, []], [2.5, 1, ["processing"]]]
    assert progress_summary([sample(0.2)], 0.3)["throughout"]  # answered inside the grace period: nothing to show


def test_verdict_and_table_follow_the_targets():
    tab = {
        "tab": "Score a pair",
        "seconds": 2.5,
        "tab_open_s": 0.3,
        "result": "x",
        "progress": {"visible_share": 1.0, "longest_gap_s": 0.0, "throughout": True},
    }
    slow = tab | {"tab": "Results", "seconds": 4.0}
    warm = {
        "mode": "warm",
        "page_served_s": 7.0,
        "page_drawn_s": 9.0,
        "warm": {"seconds": 80.0},
        "tabs": {"score": tab, "results": slow},
        "rss_after_pass": {"rss_mb": 900.0, "processes": 1},
    }
    assert verdict(warm) == {"score": True, "results": False, "rss": True}
    cold = warm | {
        "mode": "cold",
        "tabs": {"score": tab | {"progress": tab["progress"] | {"throughout": False}}},
        "rss_after_pass": {"rss_mb": 1500.0},
    }
    assert verdict(cold) == {"score": True, "score_progress": False, "rss": False}
    report = {
        "backend": "torch",
        "command": "python -m benchmarks.first_result",
        "load_average_end": 1.0,
        "machine": {"cpu": "cpu", "cpus": 2, "isa": ["avx2"], "load_average": 0.5},
        "modes": [cold, warm, {"mode": "warm", "error": "python -m mlse warm failed"}],
    }
    text = markdown(report)
    assert "| Results | 4.0 | 0.3 | 100% | 0.0 | no |" in text and "| Score a pair | 2.5 |" in text
    assert "python -m mlse warm failed" in text


def test_every_step_is_a_tab_in_page_order():
    assert [s.slug for s in STEPS] == [t.slug for t in TABS]


@pytest.mark.slow
def test_quick_run_times_two_tabs_cold_and_warm(tmp_path):
    reason = missing_browser()
    if reason:
        missing(reason)
    out = tmp_path / "first-result.json"
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.first_result", "--quick", "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert [m["mode"] for m in report["modes"]] == ["cold", "warm"] and report["machine"]["isa"]
    for mode in report["modes"]:
        assert "error" not in mode, mode.get("error")
        assert 0 < mode["page_served_s"] <= mode["page_drawn_s"]
        assert set(mode["tabs"]) == {"score", "results"}
        score, results = mode["tabs"]["score"], mode["tabs"]["results"]
        assert score["seconds"] > 0 and score["result"].startswith("minilm-en")  # the only model left ticked
        assert results["seconds"] > 0 and results["result"]  # a row of the refreshed table
        assert mode["rss_after_pass"]["rss_mb"] > 100
    assert report["modes"][1]["warm"]["rc"] == 0
    assert "| Score a pair |" in out.with_suffix(".md").read_text()
