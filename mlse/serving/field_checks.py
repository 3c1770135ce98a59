"""Checks of one request field whose refusals name the field, the value and what is allowed.

Each returns the problem as one line (None: acceptable), shared by the page (:mod:`mlse.ui.inputs`), the fine-tune
form and :mod:`mlse.serving.api_route`, so every surface refuses a value in the same words.
"""

from __future__ import annotations

import math

SHOWN_CHOICES = 12  # a refusal lists at most this many allowed values


def _bounds(minimum, maximum, whole: bool) -> str:
    kind = "a whole number" if whole else "a number"
    if minimum is not None and maximum is not None:
        return f"{kind} from {minimum:g} to {maximum:g}"
    if minimum is not None:
        return f"{kind} >= {minimum:g}"
    if maximum is not None:
        return f"{kind} <= {maximum:g}"
    return kind


def number_problem(field: str, payload, minimum=None, maximum=None, whole: bool = False) -> str | None:
    """Why ``payload`` is not acceptable for a numeric field (None: it is)."""
    expected = _bounds(minimum, maximum, whole)
    if isinstance(payload, bool):
        return f"{field}: {payload!r} is not a number; expected {expected}"
    try:
        number = float(payload)
    except (TypeError, ValueError, OverflowError):
        return f"{field}: {str(payload)[:80]!r} is not a number; expected {expected}"
    if not math.isfinite(number):
        return f"{field}: {payload!r} is not a finite number; expected {expected}"
    if (minimum is not None and number < minimum) or (maximum is not None and number > maximum):
        return f"{field}: {number:g} is out of range; expected {expected}"
    if whole and number != int(number):
        return f"{field}: {number:g} is not a whole number; expected {expected}"
    return None


def choice_problem(field: str, payload, allowed: list) -> str | None:
    """Why ``payload`` (one value or a list) is not among ``allowed`` (None: every value is)."""
    for value in payload if isinstance(payload, list) else [payload]:
        if value not in allowed:
            shown = ", ".join(repr(v) for v in allowed[:SHOWN_CHOICES]) or "(none available)"
            more = f" and {len(allowed) - SHOWN_CHOICES} more" if len(allowed) > SHOWN_CHOICES else ""
            return f"{field}: {str(value)[:120]!r} is not offered; choose from {shown}{more}"
    return None
