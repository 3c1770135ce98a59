"""The line a tab shows while the app's warm start (mlse.serving.warm) still prepares what its first view needs.

A press during the warm is not blocked; this note says why it took longer. The map is the exception: while the warm
computes the very map asked for, the tab shows the warm's progress (:func:`map_warm_note`) and a press waits for it
(:func:`warm_map_step`).
"""

from __future__ import annotations

from mlse.encoders.progress import duration
from mlse.errors import MlseError
from mlse.serving.warm import StepStatus, warm_status
from mlse.serving.warm_steps import map_languages
from mlse.ui.text import md_escape


def preparing_note(tab: str) -> str:
    """The note "⏳ Preparing (n %) ..." while a warm start runs and ``tab``'s first view (score, map, tatoeba, gold,
    finetune or results) waits on one of its steps; "" otherwise."""
    status = warm_status()
    pending = status.pending(tab)
    if not pending and not (status.active and status.planning):
        return ""
    doing = f" (now: {md_escape(status.current.label)})" if status.current is not None else ""
    percent = f"{status.tab_fraction(tab) * 100:.0f} %"
    return (
        f"⏳ Preparing ({percent}): the app is still computing what this tab shows first{doing}. This result "
        "was computed on the spot, so it took longer than it will next time."
    )


def with_preparing_note(tab: str, text: str) -> str:
    """``text`` with the preparing note (if any) as its first paragraph."""
    note = preparing_note(tab)
    return f"{note}\n\n{text}" if note and text else (note or text)


def warm_map_step(state, model_name, langs, n, method: str = "umap", seed: int = 0) -> StepStatus | None:
    """The running warm's step that computes this very map (model, languages, sentences, method and seed), while it
    is not finished; None otherwise (another map, or no warm running)."""
    status = warm_status()
    if not status.active or not isinstance(model_name, str):
        return None
    step = next((s for s in status.steps if s.name == f"map:{model_name}"), None)
    if step is None or step.finished or step.request != (n, method, seed):
        return None
    try:
        ours = map_languages(getattr(state, "data_dir", None))
    except MlseError:  # no FLORES: the warm skips its map
        return None
    return step if list(langs or []) == ours else None


def map_warm_note(step: StepStatus) -> str:
    """The map tab's note while the warm start prepares its map: the warm's count and ETA, or its turn when it waits."""
    if step.state == "running":
        doing = md_escape(step.note) if step.note else "starting"
        return (
            f"⏳ **Preparing the default map** (the app's warm start, {step.fraction * 100:.0f} % of it after "
            f"{duration(step.seconds)}): {doing}. It is drawn here when ready; pressing Project now waits for this "
            "computation instead of starting a second one."
        )
    status = warm_status()
    now = f" (now: {md_escape(status.current.label)})" if status.current is not None else ""
    return (
        f"⏳ The app's warm start prepares the default map after its other steps{now}, "
        f"{status.fraction * 100:.0f} % of the warm done. Pressing Project computes it at once."
    )
