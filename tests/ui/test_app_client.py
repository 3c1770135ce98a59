"""The app launched on loopback and driven through gradio_client, as an API user would (score a pair, Tatoeba query)."""

from __future__ import annotations

import pytest

from tests.app_server import served_app


@pytest.fixture(scope="module")
def client():
    from gradio_client import Client

    with served_app() as url:
        yield Client(url, verbose=False)


def test_score_pair_through_the_api(client):
    # by name, as the API page lists the parameters (tests/core/test_api_names.py)
    pair = {"sentence1": "A man is playing a flute.", "sentence2": "Un homme joue d'une flûte en bambou."}
    table, status = client.predict(
        **pair, models=["minilm-en"], lang1="auto", lang2="auto", gold=None, api_name="/score_pair"
    )
    rows = table["data"] if isinstance(table, dict) else table
    assert rows[0][0] == "minilm-en" and -1.0 <= float(rows[0][2]) <= 1.0
    assert 0.0 <= float(rows[0][3]) <= 5.0  # the shipped calibration of minilm-en matched its weights
    assert "French" in status and "English" in status


def test_direct_score_endpoint_through_the_api(client):
    answer = client.predict(
        "A man is playing a flute.", "Un homme joue d'une flûte en bambou.", ["minilm-en"], api_name="/score"
    )
    (row,) = answer["scores"]
    assert row["model"] == "minilm-en" and -1.0 <= row["cosine"] <= 1.0 and 0.0 <= row["calibrated"] <= 5.0
    assert [lang["code"] for lang in answer["languages"]] == ["en", "fr"]
    table, _ = client.predict(
        "A man is playing a flute.",
        "Un homme joue d'une flûte en bambou.",
        ["minilm-en"],
        "auto",
        "auto",
        None,
        api_name="/score_pair",
    )
    rows = table["data"] if isinstance(table, dict) else table
    assert float(rows[0][2]) == pytest.approx(row["cosine"], abs=5e-4 + 1e-9)  # the page's number, 3 decimals


def test_bad_input_is_a_message_not_an_error(client):
    table, status = client.predict("   ", "<b>x</b>", ["minilm-en"], "auto", "auto", None, api_name="/score_pair")
    rows = table["data"] if isinstance(table, dict) else table
    assert not rows and status  # no exception reached the client


def test_tatoeba_query_through_the_api(client):
    summary, errors = client.predict(
        language="tzl", scorer="minilm-en", retrieval_criterion="cosine", api_name="/tatoeba_errors"
    )
    assert "%" in summary or "accuracy" in summary.lower()
    rows = errors["data"] if isinstance(errors, dict) else errors
    assert isinstance(rows, list) and len(rows) > 0  # an English model misses many Talossan queries


def api_error(client, *args, api_name: str, **kwargs) -> str:
    """The message an API caller gets for a refused call (gradio_client raises it as an exception)."""
    with pytest.raises(Exception) as caught:  # gradio_client's AppError; its text is what the caller reads
        client.predict(*args, api_name=api_name, **kwargs)
    return str(caught.value)


def test_an_unknown_model_names_the_field_the_value_and_the_choices(client):
    message = api_error(client, "a", "b", ["no-such-model"], "auto", "auto", None, api_name="/score_pair")
    assert "Models: 'no-such-model' is not offered; choose from" in message and "'minilm-en'" in message


def test_a_malformed_number_names_the_field_the_value_and_the_range(client):
    message = api_error(client, "en-de", "minilm-en", "test", 0, 5, "ten", api_name="/disagreements")
    assert "pairs: 'ten' is not a number; expected a whole number from 1 to 500" in message
    message = api_error(
        client, model_name="minilm-en", languages=["eng_Latn"], sentences_per_language=1e9, api_name="/language_map"
    )
    assert "Sentences per language: 1e+09 is out of range; expected a whole number from 2 to 1012" in message
