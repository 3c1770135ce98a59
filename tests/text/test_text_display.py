"""What user text keeps (joiners, variation selectors) and how tables show text and numbers (bad input)."""

from __future__ import annotations

import pandas as pd
import pytest

from mlse.text.control_chars import strip_controls
from mlse.text.sentences import clean_text
from mlse.ui import results_tab

MEANINGFUL = {
    "family emoji (ZWJ sequence)": "👨\u200d👩\u200d👧",
    "Persian with ZWNJ": "می\u200cخواهم",
    "Hindi conjunct with ZWJ": "क्\u200dष",
    "emoji presentation selector": "❤\ufe0f",
    "ideographic variation selector": "葛\U000e0100",
    "right-to-left mark": "שלום\u200f!",
}


@pytest.mark.parametrize("text", MEANINGFUL.values(), ids=MEANINGFUL.keys())
def test_meaningful_format_characters_are_kept(text):
    cleaned, notice = clean_text(text)
    assert cleaned == text and notice == ""


def test_controls_surrogates_and_bidi_overrides_are_removed_and_counted():
    kept, removed = strip_controls("a\x00b\x1bc\x7fd\u202ee\u2066f\ud800g\th\ni")
    assert kept == "abcdefg\th\ni" and removed == 6


def test_results_table_rounds_values_for_display():
    frame = pd.DataFrame(
        [
            {
                "model": "m",
                "task": "sts",
                "split": "test",
                "key": "avg:all",
                "metric": "spearman",
                "value": 52.09125475285172,
                "kind": "eval",
                "experiment": "",
                "date": "",
                "source": "x",
            },
            {
                "model": "m",
                "task": "sts",
                "split": "test",
                "key": "avg:all",
                "metric": "p",
                "value": 0.0012345,
                "kind": "eval",
                "experiment": "",
                "date": "",
                "source": "x",
            },
        ]
    )
    shown = results_tab.filter_table(frame)
    assert shown["value"].tolist() == [52.09, 0.0012]
    assert list(shown.columns[:3]) == ["model", "metric", "value"]  # the number beside what it measures
