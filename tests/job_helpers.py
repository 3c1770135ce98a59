"""Shared by the job tests: act on a running job at a known point of its progress."""

from __future__ import annotations

from collections.abc import Callable


def on_first_eval(job_fn: Callable, action: Callable) -> Callable:
    """``job_fn`` wrapped so that ``action(stop)`` runs when its first dev-evaluation record (the end of epoch 1,
    or the first dev check of a fine-tune) is reported; later evaluation records call it again."""

    def wrapped(report, stop):
        def on_record(record):
            report(record)
            if record.get("event") == "eval":
                action(stop)

        return job_fn(on_record, stop)

    return wrapped
