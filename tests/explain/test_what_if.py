"""What if? (mlse.explain.what_if): an edit of an explained pair scored as ``python -m mlse score`` scores it, the
edited pair explained with only the changed sentence re-attributed, the predicted change from the exact decomposition,
clear refusals; the app's handlers (mlse.ui.what_if_view) and ``python -m mlse explain --drop``."""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlse
from mlse.calibration.backbone import CalibratedEncoder
from mlse.encoders.protocol import similarity
from mlse.errors import MlseError
from mlse.explain import explain_pair, what_if
from mlse.explain.edits import deleted_words, find_words, predicted_change

S1, S2 = "A man is playing a flute.", "A man plays the flute in the park."
STEPS, LAYER = 4, 1  # the tiny BERT explains in milliseconds


@pytest.fixture(scope="module")
def model(tiny_bert):
    return mlse.load_model(str(tiny_bert), cache=False)


@pytest.fixture(scope="module")
def explained(model):
    return explain_pair(model, S1, S2, steps=STEPS, layer=LAYER)


def _cli_score(capsys, tmp_path, model_name: str, s1: str, s2: str, backend: str = "torch") -> dict[str, float]:
    """The columns ``python -m mlse score`` writes for a one-pair file."""
    import csv
    import io

    from mlse.cli.main import main

    pairs = tmp_path / "edited.tsv"
    pairs.write_text(f"sentence1\tsentence2\n{s1}\t{s2}\n", encoding="utf-8")
    code = main(["score", str(pairs), "--models", model_name, "--backend", backend])
    out, err = capsys.readouterr()
    assert code == 0, err
    (row,) = list(csv.DictReader(io.StringIO(out)))
    return {k: float(v) for k, v in row.items() if k.startswith(model_name)}


# -- the library ----------------------------------------------------------------------------------------------------
def test_dropping_a_word_scores_the_edited_pair_as_score_does(model, tiny_bert, explained, capsys, tmp_path):
    w = what_if(model, S1, S2, drop=["man"], explanation=explained)
    assert w.edited1 == "A is playing a flute." and w.edited2 == "A plays the flute in the park."
    assert w.dropped_words == (("man",), ("man",)) and w.is_deletion
    cos, _ = similarity(model, [w.edited1], [w.edited2])
    assert w.new_score == float(cos[0])  # the one scoring function, bit for bit
    assert w.score == float(similarity(model, [S1], [S2])[0][0])
    assert w.delta == pytest.approx(w.new_score - w.score)
    printed = _cli_score(capsys, tmp_path, str(tiny_bert), w.edited1, w.edited2)
    assert printed[f"{tiny_bert} cosine"] == pytest.approx(w.new_score, abs=1e-6)  # the CLI writes 6 decimals
    assert w.calibrated is None and w.new_calibrated is None  # the tiny model has no calibration


def test_the_prediction_is_what_the_explanation_assigned_to_the_dropped_words(model, explained):
    e = explained
    one = what_if(model, S1, S2, drop1=["flute"], explanation=e, explain_new=False)
    (i,) = one.dropped1
    assert e.words1[i] == "flute" and one.dropped2 == ()
    assert one.predicted_delta == pytest.approx(-e.word_totals1[i])  # its row plus its own term u_i
    assert one.predicted_delta_pairs == pytest.approx(-e.matrix[i].sum())  # its row alone
    (effect,) = one.word_effects()
    assert effect["total"] == pytest.approx(effect["pairs"] + effect["own_term"]) and effect["sentence"] == 1
    both = what_if(model, S1, S2, drop=["flute"], explanation=e, explain_new=False)
    (j,) = both.dropped2
    cell = e.matrix[i, j]  # in the row and in the column: taken away once
    assert both.predicted_delta == pytest.approx(-(e.word_totals1[i] + e.word_totals2[j] - cell))
    assert both.predicted_delta_pairs == pytest.approx(-(e.matrix[i].sum() + e.matrix[:, j].sum() - cell))
    assert predicted_change(e, (), ()) == (0.0, 0.0)
    assert both.new_explanation is None
    pairs, own, missed = both.predicted_parts  # the prediction's parts add up to it, and it plus the miss to the change
    assert pairs == pytest.approx(e.matrix[i].sum() + e.matrix[:, j].sum() - cell)
    assert pairs + own == pytest.approx(-both.predicted_delta) and both.predicted_delta + missed == pytest.approx(
        both.delta
    )


def test_the_edited_pair_is_explained_reusing_the_unchanged_sentence(model, explained):
    w = what_if(model, S1, S2, drop2=["park"], explanation=explained)
    new = w.new_explanation
    assert new.sides[0] is explained.sides[0]  # sentence 1 unchanged: its attribution is not recomputed
    fresh = explain_pair(model, w.edited1, w.edited2, steps=STEPS, layer=LAYER)
    np.testing.assert_allclose(new.matrix, fresh.matrix, atol=1e-9)
    assert new.score == pytest.approx(fresh.score) and new.residual == pytest.approx(fresh.residual)
    assert (new.steps, new.layer, new.rule) == (STEPS, LAYER, explained.rule)
    assert new.precision == explained.precision  # the same products as the explanation it sits beside
    assert "park" not in new.words2 and new.words1 == explained.words1


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_the_edited_pair_keeps_the_explanations_precision(model, precision):
    e = explain_pair(model, S1, S2, steps=STEPS, layer=LAYER, precision=precision)
    w = what_if(model, S1, S2, drop2=["park"], explanation=e)
    assert e.precision == w.new_explanation.precision == precision
    assert w.new_explanation.sides[0] is e.sides[0]  # still reused: the setting matches


def test_a_typed_edit_that_deletes_words_is_recognised(model, explained):
    e = explained
    typed = what_if(model, S1, S2, edited2="A man plays the flute.", explanation=e, explain_new=False)
    assert typed.is_deletion and [e.words2[j] for j in typed.dropped2] == ["in", "the", "park"]
    assert typed.dropped2[1] == 7 and e.words2[4] == "the"  # the second "the", the one deleted
    picked = what_if(model, S1, S2, drop2=["in", 7, "park"], explanation=e, explain_new=False)  # a word or its index
    assert picked.dropped2 == typed.dropped2 and picked.predicted_delta == typed.predicted_delta
    assert picked.edited2 == "A man plays the flute ."  # delete_spans leaves the space: the same words deleted
    assert typed.predicted_delta == pytest.approx(-float(e.word_totals2[list(typed.dropped2)].sum()), abs=1e-12)
    replaced = what_if(model, S1, S2, edited1="A woman is playing a flute.", explanation=e)
    assert not replaced.is_deletion and replaced.predicted_delta is None and replaced.dropped1 == ()
    assert replaced.predicted_parts is None
    assert replaced.new_explanation is not None and "woman" in replaced.new_explanation.words1
    assert deleted_words(e, 1, "A man is playing a flu.") is None  # a word cut in half
    assert deleted_words(e, 1, "A man is playing a great flute.") is None  # a word added
    assert deleted_words(e, 1, "  A man is  playing a flute . ") == ()  # white space is no deletion


def test_words_are_found_exactly_then_up_to_case(explained):
    e = explained
    assert find_words(e, "the") == {2: [4, 7]}
    assert find_words(e, "A") == {1: [1], 2: [1]}  # written exactly so: not the lower-case "a" of sentence 1
    assert find_words(e, "FLUTE") == {1: [6], 2: [5]}  # none written so: up to case
    assert find_words(e, "[CLS]") == {}  # special tokens are not words of the sentence


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"drop": ["oboe"]}, "cannot drop 'oboe': it is not a word of either sentence"),
        ({"drop1": ["park"]}, "cannot drop 'park': it is not a word of sentence 1"),
        ({"drop1": [99]}, "sentence 1 has no word number 99"),
        ({"drop": [""]}, "a word to drop must be non-empty text"),
        ({}, "the edit changes neither sentence"),
        ({"edited1": "  " + S1}, "the edit changes neither sentence"),
        ({"edited2": "   "}, "leaves sentence 2 empty"),
        ({"drop1": ["A", "man", "is", "playing", "a", "flute", "."]}, "leaves sentence 1 empty"),
        ({"drop1": ["man"], "edited1": "A flute."}, "sentence 1 is both given a new text and asked to drop words"),
    ],
)
def test_bad_edits_are_refused_with_a_message_naming_them(model, explained, kwargs, message):
    with pytest.raises(MlseError, match=message):
        what_if(model, S1, S2, explanation=explained, explain_new=False, **kwargs)


def test_an_explanation_of_another_pair_is_refused(model, explained):
    with pytest.raises(MlseError, match="another pair"):
        what_if(model, S1, "Something else.", drop=["man"], explanation=explained)


def test_a_calibrated_model_reports_both_0_5_values(model, explained):
    calibrated = CalibratedEncoder(model, lambda cos: 2.5 * (np.asarray(cos, dtype=np.float64) + 1.0))
    w = what_if(calibrated, S1, S2, drop=["flute"], explanation=explained, explain_new=False)
    cos, cal = similarity(calibrated, [w.edited1], [w.edited2])
    assert w.new_calibrated == float(cal[0]) and w.new_score == float(cos[0])
    assert w.calibrated == pytest.approx(2.5 * (w.score + 1.0), abs=1e-6)
    assert w.calibrated_delta == pytest.approx(w.new_calibrated - w.calibrated)
    data = w.to_dict()
    assert data["dropped1"] == ["flute"] and data["new_calibrated"] == w.new_calibrated
    assert json.loads(json.dumps(data))["explanation"]["words1"] == list(explained.words1)


# -- the app ----------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def app(tiny_bert):
    from mlse.serving.app_state import AppState

    return AppState(), str(tiny_bert)


def test_ticking_words_edits_the_boxes_and_what_if_shows_both_heatmaps(app):
    from mlse.ui.explain_view import explain_and_keep
    from mlse.ui.what_if_view import EXPLAIN_FIRST, EXPLAINING, drop_picked, start_what_if, what_if_pair, word_choices

    state, name = app
    *_, kept = explain_and_keep(state, name, S1, S2, STEPS, LAYER)
    e = kept["explanation"]
    assert start_what_if(kept) == (S1, S2, word_choices(kept))
    choices = dict(word_choices(kept))
    assert "1 · flute" in choices and not any("[CLS]" in label for label in choices)
    edited1, edited2 = drop_picked(kept, [choices["1 · flute"], choices["2 · park"], "2:bogus"])
    assert (edited1, edited2) == ("A man is playing a .", "A man plays the flute in the .")
    before, after, text = what_if_pair(state, kept, edited1, edited2, show_special=True)
    expected = what_if(state.encoder(name), S1, S2, edited1=edited1, edited2=edited2, explanation=e)
    np.testing.assert_allclose(np.asarray(before.data[0].z, dtype=float), e.matrix, atol=1e-9)
    np.testing.assert_allclose(np.asarray(after.data[0].z, dtype=float), expected.new_explanation.matrix, atol=1e-9)
    assert f"{expected.score:.4f} → **{expected.new_score:.4f}**" in text
    assert f"predicted **{expected.predicted_delta:+.4f}**" in text and "| 1 | flute |" in text
    assert what_if_pair(state, None, S1, S2) == (None, None, EXPLAIN_FIRST)
    assert "changes neither sentence" in what_if_pair(state, kept, S1, S2)[2]
    assert "at least one word" in what_if_pair(state, kept, "", S2)[2]
    rewritten = what_if_pair(state, kept, "A woman is playing a flute.", S2)[2]
    assert "not a deletion of whole words" in rewritten and "A woman is playing a flute." in rewritten
    first, pending, numbers = what_if_pair(state, kept, edited1, edited2, explain_new=False)  # shown at once
    assert pending is None and first is not None and EXPLAINING in numbers
    assert f"predicted **{expected.predicted_delta:+.4f}**" in numbers


def test_the_section_shows_the_numbers_first_without_a_new_public_endpoint(app):
    import gradio as gr

    from mlse.ui.explain_sections import build_score_section
    from mlse.ui.explain_view import explain_and_keep
    from mlse.ui.what_if_view import EXPLAINING

    state, name = app
    with gr.Blocks() as demo:
        build_score_section(state, gr.Textbox(), gr.Textbox(), gr.CheckboxGroup(state.model_names(), value=[]))
    labels = {getattr(b, "label", None) for b in demo.blocks.values()}
    assert {"Drop words (sentence · word)", "Sentence 1, edited", "After: the edited pair"} <= labels
    public = {d.get("api_name") for d in demo.config["dependencies"] if d.get("api_visibility") == "public"}
    assert "explain_pair" in public and "what_if" not in public
    handler = next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "what_if")
    *_, kept = explain_and_keep(state, name, S1, S2, STEPS, LAYER)
    steps = list(handler(kept, "A man is playing a .", S2, False))
    assert len(steps) == 2 and steps[0][1] is None and EXPLAINING in steps[0][2]  # the numbers, then the heatmap
    assert steps[1][1] is not None and EXPLAINING not in steps[1][2]
    assert [s[0] is None for s in list(handler(kept, S1, S2, False))] == [True]  # a refusal: said once


# -- the command line -------------------------------------------------------------------------------------------------
def test_cli_drop_prints_old_and_new_score_and_the_prediction(tiny_bert, capsys, tmp_path):
    from mlse.cli.main import main

    out = tmp_path / "explain.json"
    argv = ["explain", "--model", str(tiny_bert), S1, S2, "--steps", "4", "--layer", "1", "--drop", "flute"]
    assert main([*argv, "--drop", "park", "--json-out", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text(encoding="utf-8"))["what_if"]
    assert data["edited1"] == "A man is playing a ." and data["edited2"] == "A man plays the in the ."
    assert f"cosine {data['score']:.4f} -> {data['new_score']:.4f}" in printed
    assert f"predicted by the explanation: {data['predicted_delta']:+.4f}" in printed
    assert "the edited pair explained:" in printed and "park" not in data["new_explanation"]["words2"]
    model = mlse.load_model(str(tiny_bert))
    assert data["new_score"] == float(similarity(model, [data["edited1"]], [data["edited2"]])[0][0])

    assert main(["explain", "--model", str(tiny_bert), S1, S2, "--steps", "2", "--edit1", "A woman plays."]) == 0
    assert "predicted: none (the edit is not a deletion of whole words" in capsys.readouterr().out

    assert main([*argv[:-2], "--drop", "oboe"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "Loading weights" not in line]
    assert len(err) == 1 and err[0].startswith("error: cannot drop 'oboe'"), err


# -- me5-small ------------------------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.multithread
def test_me5_small_what_if_equals_the_score_command(capsys, tmp_path):
    model = mlse.load_model("me5-small")
    s1, s2 = "The children are playing football in the park.", "Die Kinder spielen im Park Fußball."
    w = what_if(model, s1, s2, drop=["football"])
    assert w.edited1 == "The children are playing in the park." and w.dropped_words[1] == ()
    printed = _cli_score(capsys, tmp_path, "me5-small", w.edited1, w.edited2)
    assert printed["me5-small cosine"] == pytest.approx(w.new_score, abs=1e-6)
    assert w.new_calibrated is not None and printed["me5-small 0-5"] == pytest.approx(w.new_calibrated, abs=1e-6)
    assert w.new_explanation.relative_residual < 0.02
    assert w.predicted_delta < 0 and w.delta < 0  # the word carrying the match: both say the score drops
