"""The Fine-tune form's request checked before it is queued, by the training configuration's own validation.

A fine-tune validates its configuration when it starts (:func:`mlse.train.config_validation.validate`); a request that
fails there would only fail in the job, after the queue. :func:`check_request` builds the configuration the job will
run (:func:`mlse.train.config.request_config`) and validates it up front, so the form and the command line refuse the
same settings with one set of rules. Its messages name options as the command line spells them (``sts_weight must
be > 0``); :func:`in_form_words` names the form's field instead (``STS term weight: must be > 0``).
"""

from __future__ import annotations

import re
from pathlib import Path

from mlse.dirs import runs_dir
from mlse.errors import MlseError
from mlse.train.config import FinetuneConfig, TrainRequest, request_config
from mlse.train.config_validation import validate

# configuration option -> the form's label for it
FORM_FIELDS = {
    "sts_weight": "STS term weight",
    "sts_loss": "STS loss",
    "precision": "Precision",
    "fine-tuning method": "Method",
    "batch_size": "Batch size",
    "lr": "Learning rate",
    "budget_minutes": "Time budget (minutes)",
    "eval_every_steps": "Evaluate every N steps",
    "max_steps": "Max steps",
    "max_pairs": "Max pairs per language pair",
    "extend_vocab": "Extend vocabulary",
}
_UNKNOWN = re.compile(r"^unknown (?P<option>.+?) (?P<value>'.*'); expected one of (?P<allowed>.+)$")


def in_form_words(message: str) -> str:
    """A validation message with the option named by its form label (unchanged when no label applies)."""
    unknown = _UNKNOWN.match(message)
    if unknown and unknown["option"] in FORM_FIELDS:
        return f"{FORM_FIELDS[unknown['option']]}: {unknown['value']} is not offered; choose from {unknown['allowed']}"
    for option, label in FORM_FIELDS.items():
        if message.startswith(f"{option} "):
            return f"{label}: {message[len(option) + 1 :]}"
    return message


def check_request(req: TrainRequest) -> None:
    """Refuse a fine-tuning request whose configuration cannot run, in the form's words (Stage 1 / Stage 2 requests
    are checked when their job starts)."""
    config = request_config(req, Path(runs_dir()) / (req.name or "unnamed"))
    if not isinstance(config, FinetuneConfig):
        return
    try:
        validate(config)
    except MlseError as exc:
        raise MlseError(in_form_words(str(exc))) from None
