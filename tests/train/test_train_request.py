"""The fine-tune request (mlse.train.request): validated once, when it is made; each refusal names the form's field
and what it allows, from the options' own rules (no message rewritten); the configuration's rules hold for the
command line and the form alike."""

from __future__ import annotations

import pytest

from mlse.errors import MlseError
from mlse.train.config import FinetuneConfig
from mlse.train.config_validation import OptionError, validate
from mlse.train.request import LABELS, TrainRequest


def request(**overrides) -> TrainRequest:
    fields = dict(method="ema", model="minilm-en", name="r", pairs=["en-de"], budget_minutes=1.0)
    return TrainRequest(**(fields | overrides))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"batch_size": 0}, "Batch size: must be >= 1, got 0"),
        ({"lr": -1}, "Learning rate: must be > 0, got -1"),
        ({"budget_minutes": 0}, "Time budget (minutes): must be > 0, got 0"),
        (
            {"eval_every_steps": "often"},
            "Evaluate every N steps: 'often' is not a whole number; expected a whole number >= 1",
        ),
        ({"max_steps": 2.5}, "Max steps: '2.5' is not a whole number; expected a whole number >= 1"),
        ({"precision": "fp8"}, "Precision: 'fp8' is not offered; choose from auto, fp32, bf16, fp16"),
        ({"method": "x"}, "Method: 'x' is not offered; choose from stage1, stage2, mse, ema, soft, hard, sts"),
        ({"extend_vocab": 50}, "Extend vocabulary: must be 0 or > 100, got 50"),
        ({"sts_loss": "cosent", "sts_weight": 0}, "STS term weight: must be > 0 when an STS loss is added, got 0"),
        ({"method": "sts", "sts_loss": "none"}, "STS loss: method 'sts' trains the STS term alone"),
        ({"method": "stage1", "max_epochs": -2}, "Max epochs: must be >= 1, got -2"),
        ({"colour": "blue"}, "colour: not a field of a fine-tune request"),
    ],
)
def test_a_refusal_names_the_field_and_what_it_allows(overrides, message):
    with pytest.raises(MlseError) as info:
        request(**overrides)
    assert str(info.value).startswith(message), str(info.value)


def test_a_good_request_is_kept_as_made_and_the_forms_empty_numbers_are_the_defaults():
    req = request(lr=0, max_steps="", max_pairs=0, extend_vocab=None, name=" r ")
    assert (req.lr, req.max_steps, req.max_pairs, req.extend_vocab, req.name) == (None, None, None, 0, "r")
    with pytest.raises(Exception):  # noqa: B017, PT011 - frozen: a request the job trusts cannot be changed after
        req.batch_size = 0
    request(method="stage1", model="minilm-en", pairs=["eng-deu"])  # a head job: its settings' own rules


def test_the_configurations_rules_are_the_command_lines_with_the_option_named():
    validate(FinetuneConfig(method="ema", sts_loss="none", sts_weight=0.0))  # no term: its weight is unused
    validate(FinetuneConfig(method="sts", sts_loss="cosent", sts_weight=0.0))  # the term alone: nothing to weigh
    with pytest.raises(OptionError) as info:
        validate(FinetuneConfig(method="ema", sts_loss="cosent", sts_weight=0.0))
    assert (info.value.option, str(info.value)) == ("sts_weight", "sts_weight: " + info.value.problem)
    with pytest.raises(OptionError, match="^batch_size: must be >= 1, got 0$"):
        validate(FinetuneConfig(batch_size=0))


def test_every_label_names_a_field_of_the_request():
    assert set(LABELS) <= set(TrainRequest.model_fields)
