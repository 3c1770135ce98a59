"""The app's API as ``gradio_client`` users see it: every endpoint and its parameter names.

Gradio names an endpoint's parameters after its handler's parameters, and clients pass them by those names
(``client.predict(sentence1=..., models=[...], api_name="/score_pair")``), so they are part of the API: they read as
the page's labels do, and renaming one is a change a reviewer sees here.
"""

from __future__ import annotations

import re

import pytest

# Every endpoint shown in the app's API page (``/gradio_api/info``), in the order the tabs wire them.
ENDPOINTS = {
    "/score_pair": ["sentence1", "sentence2", "models", "lang1", "lang2", "gold"],
    "/score_refresh_models": [],
    "/detect_language": ["text"],
    "/score": ["sentence1", "sentence2", "models", "lang1", "lang2"],
    "/explain_pair": ["model", "sentence1", "sentence2", "steps", "layer", "show_special_tokens"],
    "/score_file": ["pairs_file", "pasted_pairs", "models"],
    "/stop_score_file": [],
    "/language_map": ["model_name", "languages", "sentences_per_language"],
    "/map_my_sentences": ["model_name", "sentences_file", "pasted_text"],
    "/map_highlight": [],  # its input is the drawn map kept in the session, not a value a caller sends
    "/explain_tatoeba_error": [],
    "/tatoeba_errors": ["language", "scorer", "retrieval_criterion"],
    "/tatoeba_bitext_errors": ["bitext_file", "pasted_rows", "language_columns", "scorer", "retrieval_criterion"],
    "/tatoeba_compare": ["language", "scorer_a", "scorer_b", "retrieval_criterion"],
    "/tatoeba_bitext_compare": ["scorer_a", "scorer_b", "retrieval_criterion"],
    "/explain_disagreement": ["scorer"],
    "/predicted_vs_gold": ["language_pair", "scorers", "split"],
    "/disagreements": ["language_pair", "scorer", "split", "gold_from", "gold_to", "pairs"],
    "/compare_file_with_gold": ["file", "pasted_rows", "scorers", "score_range"],
    "/file_disagreements": ["file", "pasted_rows", "scorer", "score_range", "gold_from", "gold_to", "pairs"],
    "/finetune_start": [
        "method",
        "model",
        "teacher",
        "language_pairs",
        "max_pairs",
        "budget_minutes",
        "run_name",
        "overwrite",
        "batch_size",
        "learning_rate",
        "eval_every_steps",
        "max_steps",
        "max_epochs",
        "dev_max_pairs",
        "extend_vocab",
        "precision",
        "language_probe",
        "sts_loss",
        "sts_weight",
    ],
    "/finetune_stop": [],
    "/results_refresh": ["task", "model", "metric", "key_contains", "plot_task", "plot_key", "plot_metric"],
}
# Words under three letters that are whole words here: "scorer_a" / "scorer_b", "gold_to".
SHORT_WORDS = {"a", "b", "to"}
# Abbreviations a name must spell out (the kind this API used to have: lr, bs, prec, ...).
ABBREVIATIONS = {
    "prec",
    "num",
    "cfg",
    "idx",
    "tmp",
    "txt",
    "msg",
    "btn",
    "val",
    "src",
    "tgt",
    "mdl",
    "crit",
    "langs",
    "param",
    "args",
    "kwargs",
}
SNAKE_CASE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")


@pytest.fixture(scope="module")
def api_info(tmp_path_factory):
    """``get_api_info`` of the app as ``python app.py`` builds it (no server, no browser), on empty runs and cache."""
    from mlse.serving.app_state import AppState
    from mlse.ui.app import build_app

    with pytest.MonkeyPatch.context() as env:  # module-scoped: the per-test isolation of conftest is not set up yet
        env.setenv("MLSE_RUNS", str(tmp_path_factory.mktemp("runs")))
        env.setenv("MLSE_CACHE", str(tmp_path_factory.mktemp("cache")))
        env.setenv("HF_HUB_OFFLINE", "1")
        demo = build_app(AppState())
        return {"shown": demo.get_api_info(), "all": demo.get_api_info(all_endpoints=True)}


def parameter_names(endpoint: dict) -> list[str]:
    return [parameter["parameter_name"] for parameter in endpoint["parameters"]]


def test_the_api_lists_these_endpoints_with_these_parameters(api_info):
    listed = {name: parameter_names(endpoint) for name, endpoint in api_info["shown"]["named_endpoints"].items()}
    assert listed == ENDPOINTS
    assert api_info["shown"]["unnamed_endpoints"] == {}


def test_score_pair_and_finetune_start_name_each_field_of_their_form(api_info):
    """Each name sits on the field it names (the handler's parameters in the order of the event's inputs)."""
    endpoints = api_info["shown"]["named_endpoints"]
    labels = {name: {p["parameter_name"]: p["label"] for p in endpoints[name]["parameters"]} for name in endpoints}
    assert labels["/score_pair"] == {
        "sentence1": "Sentence 1",
        "sentence2": "Sentence 2",
        "models": "Models",
        "lang1": "Language of sentence 1",
        "lang2": "Language of sentence 2",
        "gold": "Reference score of the example (0–5)",
    }
    assert labels["/finetune_start"] == {
        "method": "Method",
        "model": "Student / backbone / Stage-1 scorer",
        "teacher": "Teacher",
        "language_pairs": "Language pairs",
        "max_pairs": "Max pairs per language pair",
        "budget_minutes": "Time budget (minutes)",
        "run_name": "Run name (folder under runs/)",
        "overwrite": "Overwrite an existing run of that name",
        "batch_size": "Batch size",
        "learning_rate": "Learning rate (empty: the method's default)",
        "eval_every_steps": "Evaluate on dev every N steps",
        "max_steps": "Max steps (fine-tuning; empty: budget only)",
        "max_epochs": "Max epochs (Stage 1/2; empty: default)",
        "dev_max_pairs": "Dev rows per dev pair (empty: all)",
        "extend_vocab": "Extend vocabulary by N pieces (0: off)",
        "precision": "Precision",
        "language_probe": "Stage 1: language-ID probe after training",
        "sts_loss": "STS loss on scored pairs (STS Multi MT train)",
        "sts_weight": "STS term weight beside the method's loss",
    }


def test_the_json_route_takes_the_score_endpoints_names(api_info):
    """``POST /api/score`` (mlse.serving.api_route) and Gradio's ``/score`` answer the same call: same field names."""
    from mlse.serving.api_route import FIELDS

    assert list(FIELDS) == parameter_names(api_info["shown"]["named_endpoints"]["/score"])
    assert not any(name_problems(field) for field in FIELDS)


def name_problems(name: str) -> list[str]:
    """What makes a parameter name cryptic: too short, not snake_case, Gradio's stand-in for a nameless parameter,
    a word cut short or a known abbreviation."""
    problems = []
    if len(name) < 3:
        problems.append("shorter than 3 characters")
    if not SNAKE_CASE.fullmatch(name):
        problems.append("not snake_case words (no leading or trailing _)")
    if re.fullmatch(r"param_\d+", name):
        problems.append("Gradio's placeholder for a parameter it could not name")
    for word in name.split("_"):
        letters = word.rstrip("0123456789")
        if letters in ABBREVIATIONS:
            problems.append(f"abbreviation {letters!r}")
        elif len(letters) < 3 and letters not in SHORT_WORDS:
            problems.append(f"word {word!r} under 3 letters")
    return problems


def test_no_parameter_name_is_short_or_cryptic(api_info):
    """Over every endpoint a client can call, the undocumented ones included."""
    problems = {
        f"{endpoint}({name})": name_problems(name)
        for endpoint, info in api_info["all"]["named_endpoints"].items()
        for name in parameter_names(info)
    }
    assert {where: why for where, why in problems.items() if why} == {}
    assert len(problems) >= sum(map(len, ENDPOINTS.values()))  # the check did see every parameter


@pytest.mark.parametrize("name", ["a", "l1", "lr_", "bs", "prec", "langs", "param_3", "m", "maxPairs", "lang_", "n"])
def test_the_rule_flags_the_names_the_api_used_to_have(name):
    assert name_problems(name)


@pytest.mark.parametrize("name", ["sentence1", "lang2", "scorer_a", "gold_to", "budget_minutes", "eval_every_steps"])
def test_the_rule_passes_plain_names(name):
    assert name_problems(name) == []
