"""mlse.data.json_safe: the one NaN -> None of the package (result files, training records, the app's JSON answers,
the benchmarks' reports)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from mlse.data.json_safe import finite_or_none, nan_to_none


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.5, 1.5),
        (3, 3.0),
        ("2.25", 2.25),
        (" 4 ", 4.0),
        (np.float32(0.5), 0.5),
        (math.nan, None),
        (math.inf, None),
        (-math.inf, None),
        ("nan", None),
        (None, None),
        ("", None),
        ("abc", None),
        ([1.0], None),
    ],
)
def test_finite_or_none(value, expected):
    got = finite_or_none(value)
    assert got == expected and (got is None or type(got) is float)


def test_nan_to_none_at_any_depth_gives_strict_json():
    record = {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf, "d": (2, math.nan)}], "e": "nan", 3: None}
    clean = nan_to_none(record)
    assert clean == {"a": None, "b": [1.0, None, {"c": None, "d": [2, None]}], "e": "nan", 3: None}
    assert json.loads(json.dumps(clean, allow_nan=False)) == json.loads(json.dumps(clean))
    assert math.isnan(record["a"])  # a copy: the input is left as it was


def test_the_old_callers_use_it(tmp_path):
    from mlse.data.records import finite_or_none as records_finite
    from mlse.runs.results import EvalResult
    from mlse.runs.results_index import _number
    from mlse.train.loop import finite_or_none as loop_finite

    assert loop_finite is finite_or_none and records_finite is finite_or_none  # records: a cell's number
    assert finite_or_none(" 1e3 ") == 1000.0 and finite_or_none("inf") is None and finite_or_none("x") is None
    assert _number(True) is None and _number("1.0") is None and _number(2) == 2.0 and _number(math.nan) is None
    result = EvalResult(model="m", model_identity="m:0", task="sts", split="test", scores={"x": {"pearson": math.nan}})
    text = result.write_json(tmp_path / "r.json").read_text()
    assert json.loads(text)["scores"] == {"x": {"pearson": None}} and "NaN" not in text
