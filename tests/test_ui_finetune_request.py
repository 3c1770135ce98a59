"""The Fine-tune form's request is validated as the job would validate it, and the messages name the form's fields."""

from __future__ import annotations

import pytest

from mlse.errors import MlseError
from mlse.train.config import FinetuneConfig, TrainRequest
from mlse.train.config_validation import validate
from mlse.ui.finetune_request import FORM_FIELDS, check_request, in_form_words


def request(**overrides) -> TrainRequest:
    fields = dict(method="ema", model="minilm-en", name="r", pairs=["en-de"], budget_minutes=1.0)
    return TrainRequest(**(fields | overrides))


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("sts_weight must be > 0 when an STS loss is added, got 0", "STS term weight: must be > 0 when"),
        ("unknown precision 'fp8'; expected one of auto, fp32", "Precision: 'fp8' is not offered; choose from auto"),
        ("unknown fine-tuning method 'x'; expected one of mse", "Method: 'x' is not offered"),
        ("no dev pairs given", "no dev pairs given"),  # no form field: unchanged
        ("lr_schedule must be set", "lr_schedule must be set"),  # a prefix of another option is not a match
    ],
)
def test_messages_name_the_form_field(message, expected):
    assert in_form_words(message).startswith(expected)


def test_every_form_field_names_an_option_the_validation_uses():
    import inspect

    from mlse.train import config_validation

    source = inspect.getsource(config_validation.validate)
    assert all(option in source for option in FORM_FIELDS)


def test_a_request_the_job_would_refuse_is_refused_before_it_is_queued():
    bad = request(extend_vocab=50)
    with pytest.raises(MlseError, match="Extend vocabulary: must be 0 or > 100"):
        check_request(bad)
    check_request(request())  # a good one passes
    check_request(request(method="stage1", model="minilm-en", pairs=["en-de"]))  # checked when its job starts


def test_the_term_weight_matters_only_beside_another_loss():
    validate(FinetuneConfig(method="ema", sts_loss="none", sts_weight=0.0))  # no term: its weight is unused
    validate(FinetuneConfig(method="sts", sts_loss="cosent", sts_weight=0.0))  # the term alone: nothing to weigh
    with pytest.raises(MlseError, match="sts_weight must be > 0"):
        validate(FinetuneConfig(method="ema", sts_loss="cosent", sts_weight=0.0))
