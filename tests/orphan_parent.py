"""An app stand-in for the orphan tests (tests/test_train_orphans.py): ``python -m tests.orphan_parent ROOT MODE`` runs
one job in a child through :func:`mlse.train.child_jobs.run_in_child`, holding the job lock of run ``orphan-run``
under ROOT, and prints ``CHILD <pid>`` once the child is working, so that the test can ``kill -9`` this process.

The child's job (:func:`busy`) works until it is stopped; ``MODE`` says how it takes a stop:
``obedient`` -- it writes ``ROOT/saved-on-stop`` (its stand-in for saving the best checkpoint) and returns;
``stubborn`` -- it never looks at the stop event, so only the hard exit ends it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from mlse.runs.job_lock import lock_request
from mlse.train.child_jobs import run_in_child

RUN = "orphan-run"


def busy(root: str, mode: str, *, report, stop) -> str:
    report({"event": "phase", "pid": os.getpid()})
    while mode == "stubborn" or not stop.is_set():
        time.sleep(0.05)
    Path(root, "saved-on-stop").write_text(str(os.getpid()))
    return "stopped"


def main(root: str, mode: str) -> None:
    def report(record: dict) -> None:
        if "pid" in record:
            print(f"CHILD {record['pid']}", flush=True)

    run_in_child(
        "tests.orphan_parent:busy",
        root,
        mode,
        report=report,
        stop=threading.Event(),
        lock=lock_request(Path(root), RUN),
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
