"""How the fine-tune tab shows a job's progress: the fraction done, a progress bar, the loss and dev-score curves,
and the status lines. Plain functions of a :class:`mlse.train.runner.Job` and its progress records (``eval`` records
carry the step or epoch ``x``, the minutes, the loss and the dev score), called on every tick of the tab's timer.
"""

from __future__ import annotations

import time

from mlse.encoders.progress import Progress
from mlse.train.config import HEAD_METHODS
from mlse.train.request import TrainRequest
from mlse.train.runner import Job, JobRunner
from mlse.ui.text import html_text, md_code, md_escape

CURVE_LAYOUT = {"height": 320, "margin": dict(l=40, r=10, t=40, b=40)}  # both curves' figures


def job_fraction(job: Job, records: list[dict], now: float | None = None) -> tuple[float, str]:
    """(fraction done in [0, 1], a short label) from the budget clock and, when capped, the step/epoch count. The
    clock starts at the ``training`` record; before it, the encoding's own count (:func:`encoding_fraction`)."""
    if job.done:
        return 1.0, job.state
    if job.state == "queued":
        return 0.0, "queued"
    req: TrainRequest | None = job.meta.get("request")
    evals = [r for r in records if r.get("event") == "eval"]
    started = [r for r in records if r.get("event") == "training"]
    if req is None or not (evals or started):
        encoding = [r for r in records if r.get("event") == "encoding"]
        if req is not None and encoding:
            return encoding_fraction(encoding[-1])
        phases = [r.get("message") for r in records if r.get("event") == "phase" and r.get("message")]
        return 0.02, phases[-1] if phases else "preparing"  # e.g. "preparing: loading data and models"
    now = now or time.time()
    last = evals[-1] if evals else started[-1]
    minutes = (last.get("minutes") or 0.0) if evals else 0.0
    live_minutes = minutes + max(0.0, now - (job.started or now) - last["t"]) / 60
    fraction = live_minutes / req.budget_minutes
    cap = req.max_epochs if req.method in HEAD_METHODS else req.max_steps
    if cap and evals:
        fraction = max(fraction, last["x"] / cap)
    return min(fraction, 0.99), f"{live_minutes:.1f} of {req.budget_minutes:g} min"


def encoding_fraction(record: dict) -> tuple[float, str]:
    """(the share of the texts encoded, ``"preparing — encoding: n / N texts (p%), c from the cache, r texts/s, ETA t
    (budget not started)"``) of an ``encoding`` record."""
    done, total, rate = record.get("done") or 0, record.get("total") or 0, record.get("rate")
    cached = min(int(record.get("cached") or 0), done)
    job = Progress("encoding", total, done, unit="texts", encoded=done - cached, measured=rate or 0.0)
    return min(max(job.fraction() or 0.0, 0.02), 0.99), f"preparing — {job.line()} (budget not started)"


def progress_html(fraction: float, label: str) -> str:
    """A plain HTML progress bar (gr.Progress only lives inside a running event; this one is polled)."""
    pct = max(0.0, min(1.0, fraction)) * 100
    return (
        f'<div style="border:1px solid #999;border-radius:4px;height:18px;width:100%;position:relative">'
        f'<div style="background:#4f7be0;height:100%;width:{pct:.1f}%;border-radius:3px"></div>'
        f'<span style="position:absolute;left:8px;top:0;font-size:12px;line-height:18px">{pct:.0f}% — '
        f"{html_text(label)}</span></div>"
    )


def curves(records: list[dict], method: str | None, x_axis: str = "step") -> tuple:
    """(loss figure, dev-score figure) of the job's evaluation records, against step (epoch) or minutes."""
    import plotly.graph_objects as go  # lazy: plotly is slow to import; only figures need it

    evals = [r for r in records if r.get("event") == "eval"]
    heads = method in HEAD_METHODS
    use_minutes = x_axis == "minutes"
    xs = [r["minutes"] if use_minutes else r["x"] for r in evals]
    x_title = "minutes" if use_minutes else ("epoch" if heads else "step")
    loss = go.Figure(go.Scatter(x=xs, y=[r.get("loss") for r in evals], mode="lines+markers", name="train loss"))
    loss.update_layout(title="Training loss", xaxis_title=x_title, yaxis_title="loss", **CURVE_LAYOUT)
    sts = [r.get("sts_loss") for r in evals]
    if any(v is not None for v in sts):  # the STS term on its own axis: beside a method it is weighted ~0.001
        loss.add_trace(go.Scatter(x=xs, y=sts, mode="lines+markers", name="STS term (unweighted)", yaxis="y2"))
        loss.update_layout(
            yaxis2=dict(title="STS term", overlaying="y", side="right"),
            legend=dict(orientation="h", y=-0.25),
            margin=dict(l=40, r=50, t=40, b=40),
        )
    if any(r.get("dev") is not None for r in evals):
        ys, y_title = [r.get("dev") for r in evals], "dev Pearson x100" if method == "stage2" else "dev Spearman x100"
    else:
        ys, y_title = [r.get("dev_loss") for r in evals], "dev loss"
    dev = go.Figure(go.Scatter(x=xs, y=ys, mode="lines+markers", name=y_title))
    saved = [(x, y) for x, y, r in zip(xs, ys, evals) if r.get("saved")]
    if saved:
        x, y = zip(*saved)
        dev.add_trace(go.Scatter(x=x, y=y, mode="markers", name="checkpoint", marker=dict(symbol="star", size=11)))
    dev.update_layout(title=f"Dev score ({y_title})", xaxis_title=x_title, yaxis_title=y_title, **CURVE_LAYOUT)
    return loss, dev


def job_markdown(jobs: JobRunner, job: Job | None, others: str | None = None) -> str:
    """Status for a session: what runs (or ran last), its state and message, where its model went. ``others``: the
    line about the runner to show instead of its full status (a public page names no other visitor's run)."""
    lines = [md_escape(jobs.status_text() if others is None else others)]
    if job is not None:
        lines.append(
            f"**{md_escape(job.name)}** — {md_escape(job.description)} — *{job.state}*, "
            f"{job.elapsed() / 60:.1f} min: {md_escape(job.message)}"
        )
        result = job.result if isinstance(job.result, dict) else None
        if result and job.state in ("finished", "stopped"):
            lines.append(
                f"Model saved as `{md_code(result['run'])}`: it is in the other tabs' model lists (refresh them)."
            )
    return "\n\n".join(lines)
