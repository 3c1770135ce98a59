"""An app stand-in for the orphan tests (tests/train/test_train_child_jobs.py): ``python -m tests.orphan_parent ROOT
MODE`` runs one job in a child through :func:`mlse.train.child_jobs.run_in_child`, holding the job lock of run
``orphan-run`` under ROOT, and prints ``CHILD <pid>`` once the child is working, so that the test can ``kill -9`` this
process.

The child's job (:func:`busy`) works until it is stopped; ``MODE`` says how it takes a stop:
``obedient`` -- it writes ``ROOT/saved-on-stop`` (its stand-in for saving the best checkpoint) and returns;
``stubborn`` -- it writes ``ROOT/stop-seen`` when the stop arrives and works on, so only the hard exit ends it.
Either way the child writes ``ROOT/exited-normally`` from an ``atexit`` hook: an interpreter that ends on its own runs
it, the hard exit (``os._exit``) does not, so the files tell the test how the child ended without a clock.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from pathlib import Path

from mlse.runs.job_lock import lock_request
from mlse.stop_signal import StopSignal
from mlse.train.child_jobs import run_in_child

RUN = "orphan-run"


def busy(root: str, mode: str, *, report, stop) -> str:
    atexit.register(Path(root, "exited-normally").write_text, str(os.getpid()))
    report({"event": "phase", "pid": os.getpid()})
    while mode == "stubborn" or not stop.is_set():
        if stop.is_set() and not Path(root, "stop-seen").exists():
            Path(root, "stop-seen").write_text(str(os.getpid()))
        time.sleep(0.05)
    Path(root, "saved-on-stop").write_text(str(os.getpid()))
    return "stopped"


def main(root: str, mode: str) -> None:
    def report(record: dict) -> None:
        if "pid" in record:
            print(f"CHILD {record['pid']}", flush=True)

    run_in_child(
        "tests.orphan_parent:busy", root, mode, report=report, stop=StopSignal(), lock=lock_request(Path(root), RUN)
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
