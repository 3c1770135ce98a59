"""The fine-tune tab's methods and what the form shows for each: labels and explanations, which models and teachers
a method takes, the language pairs it offers, and where its training pairs come from. The methods themselves and
their defaults are the configurations' (:mod:`mlse.train.config`).
"""

from __future__ import annotations

from mlse.data.bitext_sample import training_bitext_source
from mlse.data.pairs import training_pair_choices
from mlse.errors import MlseError
from mlse.runs.folders import training_run_name
from mlse.train.config import JOB_METHODS, METHODS, PAIR_METHODS, STS_LOSSES, TEACHER_METHODS
from mlse.ui.text import md_escape

METHOD_LABELS = {
    "stage1": "Stage 1 head (meaning / language split)",
    "stage2": "Stage 2 head (STS regression on Stage-1 meaning)",
    "mse": "MSE distillation (Reimers & Gurevych)",
    "ema": "EMA teacher (Ham & Kim)",
    "soft": "Soft contrastive (Park et al.)",
    "hard": "Hard contrastive (in-batch negatives)",
    "sts": "Scored pairs only (CoSENT / AnglE)",
}
STS_LOSS_LABELS = {"none": "none", "cosent": "CoSENT (Su 2022)", "angle": "AnglE (Li & Li 2023)"}
STS_NOTE = (
    "Scored pairs: the STS Multi MT train split's human-scored pairs, in every pairing of its 11 languages "
    "(sentences of STS dev/test and Tatoeba left out), ranked by the student's cosines."
)
METHOD_NOTES = {
    "stage1": "Trains heads on the frozen backbone's cached embeddings of Tatoeba-Challenge bitext. No teacher. "
    "The budget counts training: encoding the bitext comes first, with its own count. Stop ends it within "
    "seconds in any phase. Stopped while encoding, it saves nothing (the encoded sentences are cached for the next "
    "try); in training, it saves the best epoch so far, marked partial.",
    "stage2": "Needs a Stage-1 scorer (a `runs/...` model with heads) as the model; trains on STS Multi MT train, "
    "early-stops on dev. Max pairs does not apply. Budget and Stop end it within seconds; once training has "
    "begun the best epoch so far is saved, marked partial.",
    "mse": "The student learns to reproduce the frozen teacher's embedding of the English side for both sides. "
    "Teacher and student must have the same dimension.",
    "ema": "The teacher is an exponential moving average of the student itself (no separate teacher).",
    "soft": "Contrastive loss with the frozen teacher's similarities as soft labels; dimensions may differ.",
    "hard": "Contrastive loss with in-batch negatives; no teacher.",
    "sts": "No translation loss: the student learns only from scored pairs (the STS loss below), the recipe with "
    "the best cross-lingual STS at 20 CPU-minutes in the students study; beside EMA, it keeps Tatoeba retrieval. "
    "The language pairs are not used.",
}


def model_choices(state, method: str) -> list[str]:
    """Stage 2 trains on a Stage-1 scorer; every other method on a plain encoder (scorers have frozen backbones)."""
    return [m.name for m in state.models() if (m.source == "scorer") == (method == "stage2")]  # the state's scan


def all_pair_choices() -> list[str]:
    """Every language pair some method offers (what the API may send, whichever method the page shows)."""
    return list(dict.fromkeys(p for m in JOB_METHODS for p in training_pair_choices(m)[0]))


def uses_bitext(method: str) -> bool:
    """Whether ``method`` trains on translation pairs (then the form names where they come from)."""
    return method in PAIR_METHODS or method == "stage1"


def method_settings(state, method: str, sts_loss: str | None = None) -> dict:
    """What the form shows for ``method``: model list, whether a teacher applies, pair lists, the STS term's fields
    (``sts_loss``: the form's current choice), an explanation."""
    models = model_choices(state, method)
    offered, default = training_pair_choices(method)  # all offered pairs, the default selection
    preferred = state.preferred_model()
    default_model = preferred if preferred in models else (models[0] if models else None)
    # the STS loss shown: the term alone needs one (CoSENT unless another is chosen); the others keep the choice
    current = sts_loss if sts_loss in STS_LOSSES else "none"
    return {
        "models": models,
        "model": default_model,
        "teacher_visible": method in TEACHER_METHODS,
        "teachers": model_choices(state, "mse"),
        "teacher": preferred if method in TEACHER_METHODS else None,
        "pairs": offered,
        "pairs_value": default,
        "pairs_visible": method != "sts",
        "max_pairs_visible": uses_bitext(method),
        "sts_visible": method in METHODS,
        "sts_loss": "cosent" if method == "sts" and current == "none" else current,
        "sts_weight_visible": method in PAIR_METHODS,
        "note": METHOD_NOTES.get(method, "")
        + (" " + STS_NOTE if method in METHODS else "")
        + (" " + training_data_note(state) if uses_bitext(method) else ""),
        "name": training_run_name(default_model, method) if default_model else "",
    }


def training_data_note(state) -> str:
    """Where the bitext methods' training pairs come from: the data directory, or the sample shipped with the app."""
    try:
        return md_escape(f"Training pairs: {training_bitext_source(state.data_dir).describe()}.")
    except MlseError as exc:
        return md_escape(str(exc))
