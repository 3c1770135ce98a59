"""The Fine-tune tab's side of its jobs: the app-wide runner, who owns a run, Stop, and the timer's poll.

A run belongs to the page session holding its unguessable owner token (:func:`new_owner`); on a public deployment
Stop, progress and curves reach only that owner's run, and others learn only that a run is busy. On one's own machine
a page that lost its token may still watch and stop the run.
"""

from __future__ import annotations

import secrets

from mlse.public_mode import public_mode
from mlse.train.runner import JobRunner
from mlse.ui.finetune_progress import curves, job_fraction, job_markdown, progress_html
from mlse.ui.text import md_escape

QUEUE_SIZE = 2  # runs that may wait behind the running one (public: none, a second visitor's run is refused)


def runner(state) -> JobRunner:
    """The app-wide job runner, kept on the shared state (created on first use)."""
    if state.jobs is None:
        # a finished run is a new model: rescan at once, so every tab's picker offers it on its next poll
        queue = 0 if public_mode() else QUEUE_SIZE
        state.jobs = JobRunner(max_queued=queue, on_finish=lambda job: state.refresh())
    return state.jobs


def new_owner() -> str:
    """A page session's owner token: unguessable, made on the server, kept in the session's state."""
    return secrets.token_urlsafe(24)


def stop_run(state, owner: str | None = None) -> str:
    """Ask ``owner``'s run to stop (fine-tuning keeps its best checkpoint). On a public deployment only the owner's
    run is reached; on one's own machine a page without a run of its own stops the running one."""
    jobs = runner(state)
    if public_mode():
        return md_escape(jobs.stop(owner=owner or new_owner()))  # no token: a token nobody has, so nothing stops
    own = jobs.latest(owner) if owner is not None else None
    return md_escape(jobs.stop(owner=owner) if own is not None and not own.done else jobs.stop())


def poll(state, x_axis: str = "step", owner: str | None = None) -> tuple[str, str, object, object, tuple]:
    """Everything the timer refreshes: (status markdown, progress bar HTML, loss figure, dev figure, version).

    ``version`` changes only when the curves can have changed; ``owner``: the page session's token."""
    jobs = runner(state)
    if public_mode():
        job = jobs.latest(owner) if owner else None
        status = (job_markdown(jobs, job, others=jobs.busy_text(owner))) if job else md_escape(jobs.busy_text(owner))
    else:
        job = (jobs.latest(owner) if owner else None) or jobs.latest()
        status = job_markdown(jobs, job)
    if job is None:
        loss, dev = curves([], None, x_axis)
        return status, progress_html(0.0, "no run yet"), loss, dev, (None, 0, "", x_axis)
    records = jobs.records(job)
    req = job.meta.get("request")
    loss, dev = curves(records, req.method if req else None, x_axis)
    fraction, label = job_fraction(job, records)
    version = (job.id, len(records), job.state, x_axis)
    return status, progress_html(fraction, label), loss, dev, version
