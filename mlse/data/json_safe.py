"""Numbers fit for strict JSON: NaN and the infinities become ``null`` (``json.dumps`` would write ``NaN``, which
browsers, ``jq`` and most JSON readers refuse); for result files, training records, the app's JSON answers and the
benchmarks' reports.
"""

from __future__ import annotations

import math
from typing import Any


def finite_or_none(value: Any) -> float | None:
    """``value`` as a finite float, or None: for NaN, the infinities, None and anything ``float()`` refuses."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def nan_to_none(obj: Any) -> Any:
    """A copy of ``obj`` with every non-finite float, in dicts, lists and tuples at any depth, replaced by None.

    Tuples become lists (as JSON writes them); other values are kept as they are."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: nan_to_none(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [nan_to_none(v) for v in obj]
    return obj
