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
    table, status = client.predict("A man is playing a flute.", "Un homme joue d'une flûte en bambou.", ["minilm-en"],
                                   "auto", "auto", None, api_name="/score_pair")  # fmt: skip
    rows = table["data"] if isinstance(table, dict) else table
    assert rows[0][0] == "minilm-en" and -1.0 <= float(rows[0][2]) <= 1.0
    assert 0.0 <= float(rows[0][3]) <= 5.0  # the shipped calibration of minilm-en matched its weights
    assert "French" in status and "English" in status


def test_bad_input_is_a_message_not_an_error(client):
    table, status = client.predict("   ", "<b>x</b>", ["minilm-en"], "auto", "auto", None, api_name="/score_pair")
    rows = table["data"] if isinstance(table, dict) else table
    assert not rows and status  # no exception reached the client


def test_tatoeba_query_through_the_api(client):
    summary, errors = client.predict("tzl", "minilm-en", "cosine", api_name="/tatoeba_errors")
    assert "%" in summary or "accuracy" in summary.lower()
    rows = errors["data"] if isinstance(errors, dict) else errors
    assert isinstance(rows, list) and len(rows) > 0  # an English model misses many Talossan queries
