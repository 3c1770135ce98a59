"""Refusals of malformed numbers and unknown choices name the field, the value and what is allowed (mlse.ui.inputs)."""

from __future__ import annotations

import gradio as gr
import pytest

from mlse.ui.inputs import check_inputs


def refusal(component, payload) -> str:
    with pytest.raises(gr.Error) as caught:
        component.preprocess(payload)
    return caught.value.message


def test_numbers_are_checked_with_their_label_and_range():
    k = gr.Number(20, minimum=1, maximum=500, precision=0, label="pairs", render=False)
    n = gr.Slider(2, 1012, value=100, step=1, label="Sentences per language", render=False)
    lr = gr.Number(None, label="Learning rate", render=False)
    check_inputs(k, n, lr)
    assert refusal(k, "ten") == "pairs: 'ten' is not a number; expected a whole number from 1 to 500"
    assert refusal(k, 2.5) == "pairs: 2.5 is not a whole number; expected a whole number from 1 to 500"
    assert refusal(n, "nan").startswith("Sentences per language: 'nan' is not a finite number; expected a whole")
    assert refusal(n, 0) == "Sentences per language: 0 is out of range; expected a whole number from 2 to 1012"
    assert refusal(lr, [1]) == "Learning rate: '[1]' is not a number; expected a number"
    assert k.preprocess("7") == 7 and n.preprocess(50) == 50 and lr.preprocess("") is None


def test_choices_are_checked_against_the_live_list():
    live = ["minilm-en"]
    models = gr.CheckboxGroup(["minilm-en"], value=["minilm-en"], label="Models", render=False)
    split = gr.Radio(["test", "dev"], value="test", label="Split", render=False)
    check_inputs(models, allowed=lambda: live)
    check_inputs(split)
    assert refusal(models, ["minilm-en", "nope"]) == "Models: 'nope' is not offered; choose from 'minilm-en'"
    assert refusal(split, "validation") == "Split: 'validation' is not offered; choose from 'test', 'dev'"
    live.append("runs/new+s1")  # a run trained while the app is up: accepted without rebuilding the page
    assert models.preprocess(["runs/new+s1"]) == ["runs/new+s1"] and split.preprocess("dev") == "dev"
